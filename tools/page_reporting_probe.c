// First-touch cost of free memory the guest reported to the hypervisor (docs/calibration.md,
// "3d. Reported free memory"). This host is a VM whose virtio-balloon offers free page
// reporting (VIRTIO_BALLOON_F_REPORTING): mm/page_reporting.c hands free blocks of order >=
// page_reporting_order to the host, which drops their backing; the guest's next first touch of
// such a frame faults in the hypervisor. Plain anonymous memory of this process only: nothing
// on the host is changed.
//
// Build: cc -O2 -o /tmp/page_reporting_probe tools/page_reporting_probe.c
// Run:   /tmp/page_reporting_probe seq <MiB> <pause_s> [thp]
//          touch a new mapping (fresh), unmap, map and touch again at once (just freed), unmap,
//          wait pause_s sampling reported_kib every 100 ms, map and touch again (after the pause)
//        /tmp/page_reporting_probe chunks <MiB> 0 [thp]
//          touch one new mapping in 2 MiB chunks; print the chunks' cost per page by decile (a
//          chunk of frames from reported blocks costs a host fault per page, others do not)
//        /tmp/page_reporting_probe filewrite <MiB> <pause_s> <file>
//          write the file (4 KiB pwrite), fsync, drop its pages (POSIX_FADV_DONTNEED); then three
//          timed passes of 4 KiB pwrite(2) over it, each into new page cache folios (the file's
//          pages dropped before each, after a pause of pause_s before the last): is a buffered
//          write into dropped pages slower the first time than into frames the drop just freed?
//          The file is removed at the end. DROP_CACHES=1|3: write that to /proc/sys/vm/drop_caches
//          before the first pass, as the lab does before a run with files.
//        /tmp/page_reporting_probe holes <MiB> <pause_s>
//          touch a mapping, free every other 4 KiB page (order-0 frees that cannot merge while
//          their neighbours stay mapped), wait pause_s sampling reported_kib, then touch a new
//          mapping of half the size: does the module report order-0 frees, and do the holes
//          cost a host fault afterwards?
// Each touch is one store per 4 KiB page, in address order; the figures per page are the wall
// time less the thread's wait for a CPU (`on-cpu`: a host fault stalls the vCPU, which the
// guest may or may not count as the thread's CPU time) and the thread's CPU time.
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static const char *REPORTED = "/sys/module/page_reporting/parameters/reported_kib";

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
static double cpu(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
// This thread's wait for a CPU (schedstat run_delay, ns): removed from the wall time, as the lab
// does for its runner, because other work shares this host's CPUs.
static double run_delay(void) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    unsigned long long run = 0, delay = 0;
    if (f) {
        if (fscanf(f, "%llu %llu", &run, &delay) != 2) delay = 0;
        fclose(f);
    }
    return delay / 1e9;
}
static long long reported_kib(void) {
    FILE *f = fopen(REPORTED, "r");
    long long v = -1;
    if (f) {
        if (fscanf(f, "%lld", &v) != 1) v = -1;
        fclose(f);
    }
    return v;
}

static char *map(size_t bytes, int thp) {
    char *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        exit(1);
    }
    madvise(m, bytes, thp ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    return m;
}

// Touch every `step`-th page from page `first`; print ns per page (wall, cpu).
static void touch(const char *what, char *m, size_t pages, size_t first, size_t step) {
    long long r0 = reported_kib();
    double w0 = wall(), c0 = cpu(), d0 = run_delay();
    size_t n = 0;
    for (size_t i = first; i < pages; i += step, n++) m[i * 4096] = (char)i;
    double w1 = wall(), c1 = cpu(), d1 = run_delay();
    printf("%-12s pages %7zu  wall %7.1f ms  on-cpu %7.0f ns/page  cpu %6.0f ns/page  waited %5.1f ms  reported_kib %+lld\n",
           what, n, (w1 - w0) * 1e3, (w1 - w0 - (d1 - d0)) * 1e9 / n, (c1 - c0) * 1e9 / n, (d1 - d0) * 1e3,
           reported_kib() - r0);
}

// Sample reported_kib every 100 ms for `pause` seconds; print its growth at 0.1, 0.2, 0.5, 1, 2, 5, 10 ... s.
static void wait_sampling(double pause) {
    long long r0 = reported_kib();
    double t0 = wall(), marks[] = {0.1, 0.2, 0.3, 0.5, 1, 2, 3, 5, 10, 20, 30, 60};
    size_t k = 0;
    while (wall() - t0 < pause) {
        usleep(100000);
        double t = wall() - t0;
        if (k < sizeof marks / sizeof *marks && t >= marks[k]) {
            printf("  after %5.1f s: reported_kib %+lld\n", t, reported_kib() - r0);
            while (k < sizeof marks / sizeof *marks && t >= marks[k]) k++;
        }
    }
    printf("  after %5.1f s: reported_kib %+lld\n", wall() - t0, reported_kib() - r0);
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s seq|holes <MiB> <pause_s> [thp]\n", argv[0]);
        return 2;
    }
    size_t bytes = (size_t)atol(argv[2]) << 20, pages = bytes / 4096;
    double pause = atof(argv[3]);
    int thp = argc > 4 && strcmp(argv[4], "thp") == 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(argv[1], "seq") == 0) {
        char *m = map(bytes, thp);
        touch("fresh", m, pages, 0, 1);
        munmap(m, bytes);
        m = map(bytes, thp);
        touch("just-freed", m, pages, 0, 1);
        munmap(m, bytes);
        wait_sampling(pause);
        m = map(bytes, thp);
        touch("after-pause", m, pages, 0, 1);
        munmap(m, bytes);
    } else if (strcmp(argv[1], "chunks") == 0) {
        char *m = map(bytes, thp);
        size_t nchunks = pages / 512;
        double *ns = calloc(nchunks, sizeof *ns);
        long long r0 = reported_kib();
        for (size_t c = 0; c < nchunks; c++) {
            double w0 = wall(), d0 = run_delay();
            for (size_t i = c * 512; i < (c + 1) * 512; i++) m[i * 4096] = (char)i;
            ns[c] = (wall() - w0 - (run_delay() - d0)) * 1e9 / 512;
        }
        printf("chunks %zu of 2 MiB, reported_kib %+lld; on-cpu ns/page by chunk, in touch order (16 groups, median each):\n ",
               nchunks, reported_kib() - r0);
        size_t g = nchunks / 16 ? nchunks / 16 : 1;
        for (size_t c0 = 0; c0 + g <= nchunks; c0 += g) {
            double *tmp = malloc(g * sizeof *tmp);
            memcpy(tmp, ns + c0, g * sizeof *tmp);
            qsort(tmp, g, sizeof *tmp, cmp);
            printf(" %.0f", tmp[g / 2]);
            free(tmp);
        }
        qsort(ns, nchunks, sizeof *ns, cmp);
        printf("\n deciles:");
        for (int d = 0; d <= 10; d++) printf(" %.0f", ns[d == 10 ? nchunks - 1 : nchunks * d / 10]);
        printf("\n");
        munmap(m, bytes);
    } else if (strcmp(argv[1], "filewrite") == 0 && argc > 4) {
        int fd = open(argv[4], O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) {
            perror("open");
            return 1;
        }
        char buf[4096];
        memset(buf, 'x', sizeof buf);
        for (size_t i = 0; i < pages; i++)
            if (pwrite(fd, buf, 4096, (off_t)i * 4096) != 4096) return perror("pwrite"), 1;
        fsync(fd);
        for (int pass = 0; pass < 3; pass++) {
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            if (pass == 0 && getenv("DROP_CACHES")) {
                // as the lab does before a run with files (needs root; run it under the lab lock)
                FILE *d = fopen("/proc/sys/vm/drop_caches", "w");
                if (!d || fputs(getenv("DROP_CACHES"), d) < 0 || fclose(d) != 0) return perror("drop_caches"), 1;
            }
            if (pass == 2) wait_sampling(pause);
            double w0 = wall(), c0 = cpu(), d0 = run_delay();
            for (size_t i = 0; i < pages; i++) {
                buf[0] = (char)(i + pass);
                if (pwrite(fd, buf, 4096, (off_t)i * 4096) != 4096) return perror("pwrite"), 1;
            }
            double w1 = wall(), c1 = cpu(), d1 = run_delay();
            printf("write pass %d: on-cpu %6.0f ns/page  cpu %6.0f ns/page  waited %5.1f ms\n", pass,
                   (w1 - w0 - (d1 - d0)) * 1e9 / pages, (c1 - c0) * 1e9 / pages, (d1 - d0) * 1e3);
            fsync(fd);
        }
        close(fd);
        unlink(argv[4]);
    } else if (strcmp(argv[1], "holes") == 0) {
        char *m = map(bytes, 0);
        touch("fresh", m, pages, 0, 1);
        for (size_t i = 1; i < pages; i += 2) madvise(m + i * 4096, 4096, MADV_DONTNEED);
        wait_sampling(pause);
        char *h = map(bytes / 2, 0);
        touch("into-holes", h, pages / 2, 0, 1);
        munmap(h, bytes / 2);
        munmap(m, bytes);
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
