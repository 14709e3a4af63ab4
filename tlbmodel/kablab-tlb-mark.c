// SPDX-License-Identifier: GPL-2.0
/*
 * kablab-tlb-mark: mark a run's start or end for the kablab-tlb plugin,
 * from inside the guest. The reference implementation of the protocol in
 * README.md ("Runs"):
 *
 *   kablab-tlb-mark start ID   the activation instruction, a pause, then
 *                              store ID at MARKER+0 and load MARKER+0
 *   kablab-tlb-mark end        load MARKER+8
 *   kablab-tlb-mark activate   the activation instruction and the pause
 *
 * MARKER is a page mapped here with MAP_FIXED_NOREPLACE; the plugin keys
 * on the virtual address alone, so start and end may come from different
 * processes. It reads ID from guest RAM at the load, which the store just
 * before it (same CPU, program order) has filled.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define MARKER 0x6b61626c0000ul	/* the plugin's default marker= */

/*
 * A dormant plugin (from=mark) wakes at this instruction and has QEMU
 * retranslate all code; that happens at a TB boundary after it, so the
 * pause (a syscall and a sleep: many TBs, the CPU idles) keeps the start
 * marker's load out of the code translated before. An active plugin
 * ignores it.
 */
static void activate(void)
{
	struct timespec ts = { .tv_nsec = 20 * 1000 * 1000 };

	asm volatile(".byte 0x66, 0x0f, 0x1f, 0x84, 0x00, 0x4c, 0x42, 0x41, 0x4b"
		     ::: "memory");
	nanosleep(&ts, NULL);
}

static int usage(void)
{
	fprintf(stderr, "usage: kablab-tlb-mark start ID | end | activate\n");
	return 2;
}

int main(int argc, char **argv)
{
	volatile uint64_t *p;
	uint64_t id = 0;
	char *end;

	if (argc == 2 && !strcmp(argv[1], "activate")) {
		activate();
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "start")) {
		id = strtoull(argv[2], &end, 0);
		if (!*argv[2] || *end)
			return usage();
	} else if (argc != 2 || strcmp(argv[1], "end")) {
		return usage();
	}
	p = mmap((void *)MARKER, 4096, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p != (void *)MARKER) {
		perror("kablab-tlb-mark: mmap of the marker page");
		return 1;
	}
	if (argc == 3) {
		activate();
		p[0] = id;
		(void)p[0];
	} else {
		(void)p[1];
	}
	return 0;
}
