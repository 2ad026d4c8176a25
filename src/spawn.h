/* spawn.h — private interface between the files of the spawning half:
 * spawn.c (core.spawn: options and launch), spawn_proc.c (the proc handle,
 * results, wait_any), spawn_io.c (the I/O engine), spawn_exe.c (opening the
 * binary) and spawn_child.c (the fork-child sequence). */
#ifndef HCP_SPAWN_H
#define HCP_SPAWN_H

#include "hcp_core.h"
#include "isolation.h"
#include "pollable.h"

#include <stdint.h>
#include <sys/types.h>

/* Why hcp_exe_open refused, when it returns an errno. */
enum { EXE_OSERR, EXE_NOTEXEC, EXE_ESCAPES };

/* Opens path once (beneath the directory `beneath` when not NULL) and checks
 * it is a regular file with an execute bit. Returns 0 with *fd and *script
 * set, or an errno with *why set (nothing left open). */
int hcp_exe_open(const char *path, const char *beneath, int *fd, int *script,
                 int *why);

#define HCP_DATA_FDS 4

/* Everything the child needs, prepared in the parent before fork(). */
struct hcp_launch {
    const char *path;           /* the binary, as checked */
    int exe_fd, script;         /* from hcp_exe_open */
    int ndata, data_fd[HCP_DATA_FDS];   /* given to the child as fds 3.. */
    int in_fd, out_fd, err_fd;  /* the child's ends: stdin source, stdout, stderr */
    const char *cwd;
    char **argv, **envp;        /* NULL-terminated, built before fork */
    const struct hcp_isolation *iso;   /* the layers asked for, prepared */
};

/* Forks and execs. Returns the child's pid, or -1 with *err set, *step
 * naming the failed step ("fork", "setsid", ..., "isolation: landlock",
 * "execveat") and *arg the entry of a rootfs or stage step that failed (an
 * index into its plan, an RF_AT_* code, or -1); a child that failed has
 * been reaped. */
pid_t hcp_launch(const struct hcp_launch *l, int *err, const char **step, int *arg);

/* ---- the proc handle ---------------------------------------------------- */

#define PROC_MT "hcp.proc"
#define MS ((int64_t)1000000)
#define NEVER INT64_MAX

enum { S_CLOSED, S_RUNNING, S_DRAINING, S_DONE };
enum { UV_STDIN = 1, UV_RESULT = 2, UV_POLLER = 3 };
/* fds only needed until fork: the binary, the child's stdio ends, and the
 * isolation layers prepared in the parent (Landlock ruleset, cgroup.procs) */
enum { T_EXE, T_IN, T_OUT, T_ERR, T_LANDLOCK, T_CGROUP, T_EGRESS, T_EGRESS_P, T_DATA,
       NTMP = T_DATA + HCP_DATA_FDS };

/* One output stream of the child. `buf` is the capture (up to max_output,
 * or nothing when capture is off); `pend` holds what arrived since the last
 * proc:take() when the caller streams. */
struct stream {
    int fd;
    char *buf;
    size_t len, cap;
    int truncated;
    int tee;
    char *pend;
    size_t plen, pcap;
};

/* What the kernel reports of the child's cost: wait4's rusage (the child
 * and the descendants it reaped) and /proc/<pid>/io, read before the reap. */
struct usage {
    int have_ru, have_io;
    long long user_us, sys_us, maxrss_kb;
    unsigned long long rchar, wchar, read_bytes, write_bytes;
};

typedef struct {
    int state;
    pid_t pid;                 /* also the process-group id (setsid) */
    int pidfd, in_fd;
    int tmp[NTMP];
    struct stream out[2];      /* stdout, stderr: parent's read ends */
    const char *in_data;       /* pinned by the UV_STDIN uservalue */
    size_t in_len, in_off, max_output;
    int64_t t0, t_end, deadline, grace, kill_at, drain_end;
    int timed_out, term_sent, kill_sent;
    int status;                /* from waitpid; -1 if unknown */
    int capture, streaming;    /* keep output in buf; queue it in pend */
    int got_output;            /* pend gained bytes since the last take */
    struct usage usage;
} proc_t;

/* spawn_io.c */
int64_t hcp_now_ns(void);
void hcp_closefd(int *fd);
/* The one cleanup path: kills and reaps a running child, closes every fd,
 * frees the buffers; idempotent. */
void hcp_proc_release(proc_t *p);
/* Drives n procs until `need` of them are done or `deadline` has passed
 * (after at least one poll pass), or — with `on_output` — after a pass in
 * which a streaming proc received output, or an extra (pollable.h) needs
 * its caller. The nex extras are polled with the procs. Returns 0 or
 * poll's errno. */
int hcp_proc_drive(lua_State *L, proc_t **ps, int n, int need, int64_t deadline,
                   int on_output, const struct hcp_pollable *ex, int nex);
/* Nanoseconds until the proc's next timer event (a timeout, the kill after
 * the grace, the end of draining, exit polling), or NEVER. */
int64_t hcp_proc_next(const proc_t *p, int64_t now);

/* spawn_proc.c: the proc methods, core.wait_any and core.signame. */
void hcp_register_proc(lua_State *L);

#endif
