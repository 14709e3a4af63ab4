/*
 * Load a kernel module once: finit_module(2) with the given parameters,
 * and print its result. busybox insmod falls back to init_module(2) when
 * finit_module fails, so a module whose init returns an error on purpose
 * (lib/test_vmalloc reports through the log and returns -EAGAIN) would run
 * its init twice.
 *
 *   load-module MODULE.ko [PARAMS]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int fd;
	long rc;

	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: load-module MODULE.ko [PARAMS]\n");
		return 2;
	}
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		printf("KABLAB-LOAD-MODULE %s: open: %s\n", argv[1], strerror(errno));
		return 1;
	}
	rc = syscall(SYS_finit_module, fd, argc == 3 ? argv[2] : "", 0);
	printf("KABLAB-LOAD-MODULE %s: %s\n", argv[1], rc == 0 ? "loaded" : strerror(errno));
	close(fd);
	return rc == 0 ? 0 : 1;
}
