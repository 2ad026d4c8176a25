/* capture.c — the reference for make bench's capture figure: a C program
 * that captures a child's stdout the plain way — posix_spawn of
 *   head -c BYTES /dev/zero
 * with stdout on a pipe (1 MiB, F_SETPIPE_SZ), read into one buffer grown
 * by doubling (realloc) until EOF, then waitpid — and prints
 * "<seconds> <bytes captured> <peak RSS bytes (VmHWM)>". */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long long peak_rss(void)
{
    char buf[4096];
    FILE *f = fopen("/proc/self/status", "r");
    long long kb = -1;
    while (f && fgets(buf, sizeof buf, f))
        if (sscanf(buf, "VmHWM: %lld kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return kb * 1024;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: capture BYTES\n");
        return 2;
    }
    char *child[] = { "head", "-c", argv[1], "/dev/zero", NULL }, *env[] = { NULL };
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return perror("pipe"), 1;
    (void)fcntl(p[0], F_SETPIPE_SZ, 1 << 20);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], 1);
    double t0 = now_s();
    pid_t pid;
    int err = posix_spawn(&pid, "/usr/bin/head", &fa, NULL, child, env);
    if (err)
        return fprintf(stderr, "posix_spawn: %s\n", strerror(err)), 1;
    close(p[1]);
    size_t len = 0, cap = 65536;
    char *buf = malloc(cap);
    for (;;) {
        if (len == cap && !(buf = realloc(buf, cap *= 2)))
            return perror("realloc"), 1;
        ssize_t n = read(p[0], buf + len, cap - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    int st;
    waitpid(pid, &st, 0);
    printf("%.6f %zu %lld\n", now_s() - t0, len, peak_rss());
    free(buf);
    return 0;
}
