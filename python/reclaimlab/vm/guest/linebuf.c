/*
 * reclaimlab (not kernel code): linked into the kernel's cgroup selftests when the VM lab
 * builds them (reclaimlab.vm.selftests). It makes their stdout line-buffered, as it is when a
 * developer runs them on a terminal:
 *
 * - the guest follows the TAP lines as each test ends (per-test timeout, progress); with a file
 *   as stdout, glibc buffers whole blocks and nothing arrives until the binary exits;
 * - the tests fork (cg_run) and the children leave with exit(), which flushes the parent's
 *   pending, unflushed lines a second time: duplicated "ok N" lines in a buffered log.
 */
#include <stdio.h>

__attribute__((constructor)) static void reclaimlab_stdout_line_buffered(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
}
