/*
 * Take the free 2 MB blocks of an aged guest: map --mib MiB of anonymous
 * memory, ask for transparent huge pages (MADV_HUGEPAGE, so the faults also
 * compact), touch it, print how much of it ended up huge (AnonHugePages),
 * touch --ready FILE and hold it until killed.  After pipe-fragmenter has
 * left free memory in 64 KiB holes, this leaves no free 2 MB block and none
 * that compaction could still form, so the next order-9 allocation fails.
 *
 *   thp-hog --mib N --ready FILE
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static long meminfo_kib(const char *key)
{
	char line[256];
	long kib = -1;
	size_t kl = strlen(key);
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, kl) && line[kl] == ':') {
			kib = strtol(line + kl + 1, NULL, 10);
			break;
		}
	fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	long mib = 0;
	const char *ready = NULL;
	char *p;
	int fd;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--mib"))
			mib = strtol(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--ready"))
			ready = argv[i + 1];
	}
	if (mib <= 0 || mib > 65536 || !ready || argc % 2 == 0) {
		fprintf(stderr, "usage: thp-hog --mib N (1..65536) --ready FILE\n");
		return 2;
	}
	p = mmap(NULL, (size_t)mib << 20, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("thp-hog: mmap");
		return 1;
	}
	if (madvise(p, (size_t)mib << 20, MADV_HUGEPAGE))
		perror("thp-hog: madvise(MADV_HUGEPAGE)");
	for (size_t off = 0; off < (size_t)mib << 20; off += 4096)
		p[off] = 1;
	printf("KABLAB-THP-HOG mib %ld anonhugepages_kib %ld\n", mib, meminfo_kib("AnonHugePages"));
	fflush(stdout);
	fd = open(ready, O_WRONLY | O_CREAT, 0644);
	if (fd < 0) {
		perror("thp-hog: ready file");
		return 1;
	}
	close(fd);
	for (;;)
		pause();
}
