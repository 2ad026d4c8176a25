/* forker.c — for bench/floors.c: what starting a call's child costs through
 * a helper started once (a "zygote" that forks each call's child) against
 * through the spawn helper's way (a small static program exec'd first,
 * which execs the program in turn). Linked like hcp-spawn — static, with
 * its nolibc.c, no glibc start-up — so the two differ only in fork against
 * exec.
 *
 *   bench_forker exec PATH    exec PATH at once (the trampoline)
 *   bench_forker serve PATH   for each byte read on stdin: fork, the child
 *                             execs PATH; wait; answer 'k' (or 'e') */
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv);

static char *child_argv[] = { "true", NULL }, *child_envp[] = { NULL };

static int serve(const char *path)
{
    char c;
    while (read(0, &c, 1) == 1) {
        int st = 0;
        pid_t pid = fork();
        if (pid == 0) {
            execve(path, child_argv, child_envp);
            _exit(127);
        }
        c = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 'k' : 'e';
        if (write(1, &c, 1) != 1)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "exec") == 0) {
        execve(argv[2], child_argv, child_envp);
        return 127;
    }
    if (argc == 3 && strcmp(argv[1], "serve") == 0)
        return serve(argv[2]);
    return 2;
}
