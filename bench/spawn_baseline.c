/* spawn_baseline.c — the floor for hcp's per-call latency.
 *
 *   spawn_baseline [N]   posix_spawn /bin/true with an empty environment N
 *                        times (default 2000), waitpid each, and print
 *                        "posix_spawn_median_us <median>".
 *
 * Each sample is one spawn+wait, timed with CLOCK_MONOTONIC; the median
 * rather than the mean, so a few scheduler hiccups do not move it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* the Makefile builds this with plain $(CC) -O2 */
#endif
#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double now_us(void)
{
    struct timespec ts;

    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("spawn_baseline: clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    char *child_argv[] = {"true", NULL};
    char *child_envp[] = {NULL};
    long n = 2000, i;
    double *samples, median;

    if (argc > 2) {
        fprintf(stderr, "usage: spawn_baseline [N]\n");
        return 2;
    }
    if (argc == 2) {
        char *end;
        errno = 0;
        n = strtol(argv[1], &end, 10);
        if (errno != 0 || *end != '\0' || end == argv[1] || n < 1 || n > 10000000) {
            fprintf(stderr, "spawn_baseline: N must be an integer from 1 to 10000000\n");
            return 2;
        }
    }
    samples = malloc((size_t)n * sizeof *samples);
    if (!samples) {
        perror("spawn_baseline: malloc");
        return 1;
    }
    for (i = 0; i < n; i++) {
        pid_t pid;
        int status, err;
        double t0 = now_us();

        /* posix_spawn returns the error instead of setting errno. */
        err = posix_spawn(&pid, "/bin/true", NULL, NULL, child_argv, child_envp);
        if (err != 0) {
            fprintf(stderr, "spawn_baseline: posix_spawn /bin/true: %s\n", strerror(err));
            return 1;
        }
        while (waitpid(pid, &status, 0) < 0) {
            if (errno != EINTR) {
                perror("spawn_baseline: waitpid");
                return 1;
            }
        }
        samples[i] = now_us() - t0;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawn_baseline: /bin/true failed (status %d)\n", status);
            return 1;
        }
    }
    qsort(samples, (size_t)n, sizeof *samples, cmp_double);
    median = n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
    printf("posix_spawn_median_us %.1f\n", median);
    free(samples);
    return 0;
}
