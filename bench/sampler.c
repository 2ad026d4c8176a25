/* sampler.c — a reference for make bench, timed in C: each line read on
 * stdin ("<k>\n") runs command k once — posix_spawn with stdout and stderr
 * on /dev/null, then waitpid — and answers "<microseconds> <status>\n".
 *
 *   sampler CMD0... [-- CMD1... [-- ...]]
 *
 * The commands are fixed at start-up, so one request costs one spawn and
 * nothing else; bench/run.lua asks for samples interleaved with its own, so
 * every case of a run sees the same machine. The environment is the
 * sampler's own (hcp run needs HOME and PATH as a user's shell has them). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  /* the Makefile builds this with plain $(CC) -O2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define MAX_CMDS 16

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    char **cmds[MAX_CMDS];
    int n = 0;
    for (int i = 1; i < argc && n < MAX_CMDS; i++) {
        cmds[n++] = &argv[i];
        while (i < argc && strcmp(argv[i], "--") != 0)
            i++;
        if (i < argc)
            argv[i] = NULL;   /* ends command n-1 */
    }
    if (n == 0) {
        fprintf(stderr, "usage: sampler CMD... [-- CMD...]\n");
        return 2;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    char line[64];
    setvbuf(stdout, NULL, _IOLBF, 0);
    while (fgets(line, sizeof line, stdin)) {
        int k = atoi(line), status = 0;
        if (k < 0 || k >= n) {
            printf("-1 -1\n");
            continue;
        }
        double t0 = now_us();
        pid_t pid;
        int err = posix_spawn(&pid, cmds[k][0], &fa, NULL, cmds[k], environ);
        if (err == 0)
            while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        double t = now_us() - t0;
        printf("%.1f %d\n", t, err ? -err : status);
    }
    return 0;
}
