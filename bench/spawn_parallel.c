/* spawn_parallel.c — the floor for calls kept in flight.
 *
 *   spawn_parallel K N   runs N posix_spawns of /bin/true with an empty
 *                        environment, keeping K in flight (a new one as soon
 *                        as one is reaped), and prints
 *                        "posix_spawn_parallel_calls_per_s <rate>". */
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

static double now_s(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
        perror("spawn_parallel: clock_gettime");
        exit(1);
    }
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long arg_long(const char *s, long max)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s || v < 1 || v > max) {
        fprintf(stderr, "usage: spawn_parallel K N (positive integers)\n");
        exit(2);
    }
    return v;
}

static void spawn_one(void)
{
    char *child_argv[] = { "true", NULL };
    char *child_envp[] = { NULL };
    pid_t pid;
    int err = posix_spawn(&pid, "/bin/true", NULL, NULL, child_argv, child_envp);
    if (err != 0) {
        fprintf(stderr, "spawn_parallel: posix_spawn /bin/true: %s\n", strerror(err));
        exit(1);
    }
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: spawn_parallel K N\n");
        return 2;
    }
    long k = arg_long(argv[1], 4096), n = arg_long(argv[2], 100000000);
    long started = 0, done = 0;
    double t0 = now_s();
    while (started < k && started < n) {
        spawn_one();
        started++;
    }
    while (done < n) {
        int status;
        if (waitpid(-1, &status, 0) < 0) {
            if (errno == EINTR)
                continue;
            perror("spawn_parallel: waitpid");
            return 1;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "spawn_parallel: /bin/true failed (status %d)\n", status);
            return 1;
        }
        done++;
        if (started < n) {
            spawn_one();
            started++;
        }
    }
    printf("posix_spawn_parallel_calls_per_s %.1f\n", (double)n / (now_s() - t0));
    return 0;
}
