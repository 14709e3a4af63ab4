/* Prove memfd_secret() works: create, size, map and write a secret page. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef __NR_memfd_secret
#define __NR_memfd_secret 447
#endif

int main(void)
{
	long page = sysconf(_SC_PAGESIZE);
	int fd = syscall(__NR_memfd_secret, 0);
	char *p;

	if (fd < 0) {
		printf("KABLAB-SECRETMEM-FAIL memfd_secret: %s\n", strerror(errno));
		return 1;
	}
	if (ftruncate(fd, page) < 0) {
		printf("KABLAB-SECRETMEM-FAIL ftruncate: %s\n", strerror(errno));
		return 1;
	}
	p = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		printf("KABLAB-SECRETMEM-FAIL mmap: %s\n", strerror(errno));
		return 1;
	}
	memset(p, 0x5a, page);
	printf("KABLAB-SECRETMEM-OK fd=%d byte=%#x\n", fd, (unsigned char)p[page - 1]);
	return 0;
}
