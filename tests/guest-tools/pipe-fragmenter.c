/*
 * Age a guest's page allocator so that few free 2 MB blocks remain: fill
 * pipes with 64 KiB each (unmovable kernel pages, which compaction cannot
 * move) until MemFree is down to --leave-mib, close a seeded random half,
 * touch --ready FILE and hold the other half until killed.  Bounded by
 * --max-pipes and by the memory it leaves.
 *
 *   pipe-fragmenter --leave-mib N --max-pipes N --seed N --ready FILE
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define PIPE_BYTES (64 << 10)

static long memfree_kib(void)
{
	char line[256];
	long kib = -1;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemFree: %ld kB", &kib) == 1)
			break;
	fclose(f);
	return kib;
}

int main(int argc, char **argv)
{
	long leave_mib = 64, max_pipes = 40000, seed = 1, n = 0, kept = 0;
	const char *ready = NULL;
	static char buf[PIPE_BYTES];
	struct rlimit rl;
	int (*fds)[2];

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--leave-mib"))
			leave_mib = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--max-pipes"))
			max_pipes = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--seed"))
			seed = atol(argv[i + 1]);
		else if (!strcmp(argv[i], "--ready"))
			ready = argv[i + 1];
	}
	rl.rlim_cur = rl.rlim_max = 2 * max_pipes + 64;
	if (setrlimit(RLIMIT_NOFILE, &rl))
		perror("setrlimit");
	fds = calloc(max_pipes, sizeof(*fds));
	if (!fds)
		return 1;
	memset(buf, 0x5a, sizeof(buf));
	while (n < max_pipes) {
		if (n % 64 == 0 && memfree_kib() <= leave_mib * 1024)
			break;
		if (pipe2(fds[n], O_NONBLOCK | O_CLOEXEC)) {
			perror("pipe2");
			break;
		}
		if (write(fds[n][1], buf, sizeof(buf)) != (ssize_t)sizeof(buf)) {
			perror("write");
			close(fds[n][0]);
			close(fds[n][1]);
			break;
		}
		n++;
	}
	srandom(seed);
	for (long i = 0; i < n; i++) {
		if (random() & 1) {
			close(fds[i][0]);
			close(fds[i][1]);
		} else {
			kept++;
		}
	}
	printf("KABLAB-FRAG pipes %ld kept %ld memfree_kib %ld\n", n, kept, memfree_kib());
	fflush(stdout);
	if (ready)
		close(open(ready, O_CREAT | O_WRONLY, 0644));
	for (;;)
		pause();
}
