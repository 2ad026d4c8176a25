/* heap.c — hcp-lua's heap made before the first malloc (issue 12).
 *
 * Loading the modules of `hcp run` grows the C heap by ~1 MB, page by
 * page: ~120-250 page faults, and on a paravirtualised guest a fault costs
 * ~10 µs (measured on the bench machine: a page populated in advance costs
 * ~0.6 µs, and its first touch ~4 µs more, the host's own fill).
 *
 * By default (populate): malloc is told to grow the heap 1 MB at a time and
 * to keep up to 8 MB of free top before giving it back, and the first
 * megabyte is populated at once (MADV_POPULATE_WRITE, Linux 5.14): one
 * system call instead of a fault per page, ~0.9 ms less per `hcp run`
 * here. The heap's address is the kernel's, as random as without it; the
 * price is ~1 MB resident from the start, and (as with any such mallopt)
 * glibc's sliding mmap threshold stays at 128 KiB — a buffer past it is
 * mapped on its own, as the capture buffers are anyway. HCP_HEAP_POPULATE=0
 * turns it off; a kernel without MADV_POPULATE_WRITE ignores it.
 *
 * HCP_HUGE_HEAP=1 instead: the heap on a transparent huge page. The
 * program break is moved to one page short of a 2 MB boundary, malloc is
 * told to grow the heap 4 MB at a time, and the 2 MB of the heap past that
 * boundary (what a command's start-up uses) are marked MADV_HUGEPAGE: the
 * first page (malloc's own bookkeeping, touched at once) is a small one,
 * the rest one huge page once first touched; the heap beyond grows on
 * small pages, as before.
 *
 * Asked for only: HCP_HUGE_HEAP=1. What it costs is why it is not the
 * default: the heap's start is then one page below a 2 MB boundary, so
 * the low 21 bits of its address (malloc's own state first of all) are
 * the same in every process — 9 bits less randomness than the kernel
 * gives the heap, in the process that parses what agents send. A few
 * milliseconds of start-up on a host where page faults are dear do not
 * buy that by default. And: the heap's memory is taken 2 MB at a time
 * (a process's resident size grows by up to 2 MB), and its top is given
 * back to the kernel only past 16 MB free.
 *
 * Where the kernel has no THP (or it is "never"), madvise fails or is
 * ignored and the heap is on small pages, as without it. If malloc does
 * not grow its heap with brk (a sanitizer's or valgrind's allocator) or
 * was in use before main, nothing is marked or populated. */
#include "hcp_lua.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23   /* Linux 5.14; older headers lack it */
#endif

#define HUGE_PAGE ((uintptr_t)2 << 20)
#define POPULATE ((uintptr_t)1 << 20)   /* what `hcp run` touches, about */
#define KEEP_FREE (8 << 20)             /* free top kept: a collection does not give it back */

static int env_is(const char *name, const char *value)
{
    const char *v = getenv(name);
    return v && strcmp(v, value) == 0;
}

/* The default: the heap's first megabyte populated in one call. */
static void populate(void)
{
    long pagesz = sysconf(_SC_PAGESIZE);
    if (pagesz <= 0 || sbrk(0) == (void *)-1)
        return;
    uintptr_t page = (uintptr_t)pagesz;
    (void)mallopt(M_TOP_PAD, (int)POPULATE);
    (void)mallopt(M_TRIM_THRESHOLD, KEEP_FREE);
    char *first = malloc(64);
    void *end = sbrk(0);
    uintptr_t lo = ((uintptr_t)first + page - 1) & ~(page - 1), hi = (uintptr_t)end;
    /* only malloc's brk heap, just grown by about POPULATE */
    if (first && end != (void *)-1 && hi > lo && hi - lo <= 2 * POPULATE)
        (void)madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);   /* EINVAL before 5.14: faults, as before */
    free(first);
}

void hcp_heap_prepare(void)
{
    if (!env_is("HCP_HUGE_HEAP", "1")) {
        if (!env_is("HCP_HEAP_POPULATE", "0"))
            populate();
        return;
    }
    long pagesz = sysconf(_SC_PAGESIZE);
    if (pagesz <= 0)
        return;
    uintptr_t page = (uintptr_t)pagesz;
    void *cur = sbrk(0);
    if (cur == (void *)-1)
        return;
    /* one page below the next 2 MB boundary: malloc's first chunk there */
    uintptr_t start = (((uintptr_t)cur + page + HUGE_PAGE - 1) & ~(HUGE_PAGE - 1)) - page;
    if (sbrk((intptr_t)(start - (uintptr_t)cur)) == (void *)-1)
        return;
    /* grown and kept in steps a huge page can back; neither call fails
     * with valid values, and a failure would only leave glibc's defaults */
    (void)mallopt(M_TOP_PAD, (int)(2 * HUGE_PAGE));
    (void)mallopt(M_TRIM_THRESHOLD, (int)(8 * HUGE_PAGE));
    void *first = malloc(64);
    void *end = sbrk(0);
    uintptr_t lo = start + page, hi = (uintptr_t)end & ~(HUGE_PAGE - 1);
    /* only if malloc's heap begins where the break was put */
    if (first && (uintptr_t)first >= start && (uintptr_t)first < lo && end != (void *)-1 && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* EINVAL without THP: small pages, as before */
    free(first);
}
