/* spawn.h — private interface between spawn.c (the Lua binding and the I/O
 * engine) and spawn_child.c (opening the binary and the fork-child sequence). */
#ifndef HCP_SPAWN_H
#define HCP_SPAWN_H

#include <sys/types.h>

/* Why hcp_exe_open refused, when it returns an errno. */
enum { EXE_OSERR, EXE_NOTEXEC, EXE_ESCAPES };

/* Opens path once (beneath the directory `beneath` when not NULL) and checks
 * it is a regular file with an execute bit. Returns 0 with *fd and *script
 * set, or an errno with *why set (nothing left open). */
int hcp_exe_open(const char *path, const char *beneath, int *fd, int *script,
                 int *why);

/* Everything the child needs, prepared in the parent before fork(). */
struct hcp_launch {
    int exe_fd, script;         /* from hcp_exe_open */
    int in_fd, out_fd, err_fd;  /* the child's ends: stdin source, stdout, stderr */
    const char *cwd;
    char **argv, **envp;        /* NULL-terminated, built before fork */
};

/* Forks and execs. Returns the child's pid, or -1 with *err set and *step
 * naming the failed step ("fork", "setsid", ..., "execveat"); a child that
 * failed has been reaped. */
pid_t hcp_launch(const struct hcp_launch *l, int *err, const char **step);

#endif
