/* spawn.h — private interface between the files of the spawning half:
 * spawn.c (core.spawn: options and launch), spawn_proc.c (the proc handle,
 * results, wait_any), spawn_io.c (the I/O engine), spawn_exe.c (opening the
 * binary) and spawn_child.c (the fork-child sequence). */
#ifndef HCP_SPAWN_H
#define HCP_SPAWN_H

#include "hcp_core.h"
#include "isolation.h"
#include "pollable.h"

#include <poll.h>
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
    /* for the helper only (spawn_launch.c fills them in its copy) */
    int report_fd;              /* the close-on-exec report pipe */
    pid_t parent;               /* the runtime's pid */
    /* >= 0: with pidns, start the child as pid 1 of its namespace, hcp-init
     * itself (root, through the helper), which reports the program's end
     * (struct hcp_end_report) here; -1: the intermediate relays it */
    int status_fd;
    /* >= 0 (pidns through the intermediate): where the intermediate passes
     * hcp-init's report on to the runtime, before it reaps hcp-init */
    int end_fd;
};

/* Starts the child (spawn_launch.c): without isolation layers a
 * clone(CLONE_VM|CLONE_VFORK) child runs hcp_child and execs; with layers,
 * such a child execs the spawn helper (build/libexec/hcp-spawn), which reads
 * the plan from a memfd and runs hcp_child in a process of its own, so no
 * fork ever copies the runtime's memory; without the helper, fork() and
 * hcp_child. Returns the child's pid, or -1 with *err set, *step naming the
 * failed step ("fork", "setsid", ..., "isolation: landlock", "execveat") and
 * *arg the entry of a rootfs or stage step that failed (an index into its
 * plan, an RF_AT_* code, or -1); a child that failed has been reaped. */
pid_t hcp_launch(const struct hcp_launch *l, int *report, int *err, const char **step, int *arg);
/* With `report` not NULL, it returns as soon as the child is started, with
 * *report the (non-blocking) read end of the report pipe: EOF on it is the
 * exec, a struct hcp_child_err a failure (the child then exits 127). */

/* Starts `hcp-spawn hold` — the helper waiting for its stdin to close — in
 * the namespaces of `layers` (and the view rf plans, with ISO_ROOTFS): what
 * holds a namespace open while the module opens it (rootfs_base.c,
 * netns_pool.c). Its stdout and stderr are /dev/null; *in is the write end
 * of its stdin (closed: it exits). Returns its pid, or -1 as hcp_launch. */
pid_t hcp_hold(unsigned layers, const struct hcp_rootfs *rf, int *report, int *in, int *err, const char **step,
               int *arg);

/* ---- the child (spawn_child.c): between fork and exec, no allocation ---- */

/* Steps a child reports, in the order it takes them. */
enum { ST_SIGNALS, ST_SETSID, ST_PDEATHSIG, ST_CGROUP, ST_STAGE, ST_USERNS,
       ST_NETNS, ST_IPCNS, ST_PIDNS, ST_ROOTFS, ST_DUP2, ST_CHDIR, ST_CLOSEFDS,
       ST_RLIMITS, ST_RUN_AS, ST_CAPS, ST_NNP, ST_LANDLOCK, ST_SECCOMP, ST_EXEC,
       ST_HELPER, ST_PIDS_MAX, ST_EGRESS, ST_NSTEPS };

/* What a failing child writes to the report pipe (12 bytes: atomic). `arg`:
 * which entry of the step failed (rootfs, stage), or -1. */
struct hcp_child_err { int step; int err; int arg; };

/* hcp-init's report of the call's end on its status pipe (one write of 72
 * bytes: a pipe delivers it whole). `gone` = 1: the program ended, and every
 * other process of the namespace was killed and reaped before this was
 * written — the call has ended, though hcp-init itself is still exiting (its
 * namespaces' teardown, ~0.3 ms here). `gone` = 0: hcp-init was signalled
 * and ends now; the kernel ends the rest as it exits. The usage is that of
 * every process hcp-init reaped: getrusage(RUSAGE_CHILDREN), and its own
 * /proc/self/io, which holds theirs (have_io: it could be read). */
/* The counters of a /proc/<pid>/io. */
struct hcp_io { unsigned long long rchar, wchar, read_bytes, write_bytes; };

/* Reads them from `path` (the child's /proc/self/io, the runtime's
 * /proc/<pid>/io): 0, or -1 when it cannot be read. spawn_child.c; no
 * allocation, no stdio. */
int hcp_read_io(const char *path, struct hcp_io *io);

struct hcp_end_report {
    int status, gone;
    long long user_us, sys_us, maxrss_kb;
    int have_io, pad;
    struct hcp_io io;
};

/* The step's name for messages, or NULL; whether its `arg` names an entry. */
const char *hcp_step_name(int step);
int hcp_step_has_arg(int step);

/* Reports {step, errno, arg} on pipefd and _exit(127)s. */
_Noreturn void hcp_child_fail(int pipefd, int step, int arg);

/* clone(CLONE_VM|CLONE_VFORK|flags) of fn(arg) on a stack in the caller's
 * frame — posix_spawn's way: no page table is copied, and the caller is
 * suspended until the child execs or exits, so the region stays quiet. The
 * child may only make system calls and touch its own stack and arg. The
 * child's pid, or -1 with errno. (In the runtime and in the helper alike.) */
pid_t hcp_clone_vm(int (*fn)(void *), void *arg, int flags);

/* The whole child sequence, from the runtime's state to exec of l->path;
 * failures are reported on pipefd (EOF on it means the exec happened).
 * `parent`: the runtime's pid (PDEATHSIG is re-checked against it). */
_Noreturn void hcp_child(const struct hcp_launch *l, int pipefd, pid_t parent);

/* ---- the launch plan (plan.c): what crosses into the helper ------------- */

/* Writes l (and its isolation, rootfs and stage plans, argv, envp) into
 * fd as one blob the helper maps. 0, or -1 with errno. */
int hcp_plan_write(int fd, const struct hcp_launch *l);
/* The same into a new memfd (close-on-exec): it, or -1 with errno. */
int hcp_plan_memfd(const struct hcp_launch *l);
/* In the helper: turns the blob (mapped private and writable) back into
 * *l and *iso, pointers into the blob. 0, or -1 (EINVAL: not a plan). */
int hcp_plan_read(char *blob, size_t len, struct hcp_launch *l, struct hcp_isolation *iso);
/* The same from the plan's memfd (mapped private, then closed). */
int hcp_plan_map(int fd, struct hcp_launch *l, struct hcp_isolation *iso);

/* The descriptors a plan names, in one fixed order: pointers to them in
 * slots (at least HCP_PLAN_FDS; rootfs.base_fd only with a base view),
 * their number returned. What the helper is handed across its exec, and
 * what goes through the early child's socket (both ends: early.c,
 * spawn_child.c). hcp_plan_fds: the open ones (>= 0) of l, in that order,
 * into fds; their number. */
#define HCP_PLAN_FDS (12 + HCP_DATA_FDS)
int hcp_plan_fd_slots(struct hcp_launch *l, struct hcp_isolation *iso, int **slots);
int hcp_plan_fds(const struct hcp_launch *l, int *fds);

/* ---- the early child (early.c, spawn_launch.c, the helper's `early`) ---- */

/* Starts it: a helper, pid 1 of a new pid namespace, that makes an IPC and
 * a mount namespace and begins the view e->iso->rootfs before any call's
 * plan exists, then waits on `sock` (its end of a socketpair) for one. Its
 * report pipe's write end is e->report_fd. Returns its pid, or -1 with *err. */
pid_t hcp_launch_early(const struct hcp_launch *e, int sock, int *err);
/* In hcp_launch: the early child takes this launch if it can (its plan and
 * descriptors sent): its pid, *report the read end of its report pipe; -2
 * when it cannot: none, another kind of launch, or it failed or could not
 * be sent the plan (then it is ended): launch as usual. */
pid_t hcp_early_use(const struct hcp_launch *l, int *report);
/* Whether launch l suits an early child that began the view `ahead` (both
 * ends ask: spawn_child.c); done as in hcp_rootfs_extends. */
int hcp_early_suits(const struct hcp_isolation *ahead, const struct hcp_launch *l, unsigned char *done);
/* In the helper: the early child's whole life (spawn_child.c). */
_Noreturn void hcp_child_early(const struct hcp_launch *e, int sock);

/* The helper's descriptor (O_RDONLY|O_CLOEXEC, looked up once), or -1 when
 * there is none: beside the C module, or ../libexec/ of it; the
 * environment variable HCP_SPAWN_HELPER names another, or "none". */
int hcp_helper_fd(void);

/* ---- the proc handle ---------------------------------------------------- */

#define PROC_MT "hcp.proc"
#define MS ((int64_t)1000000)
#define NEVER INT64_MAX

enum { S_CLOSED, S_RUNNING, S_DRAINING, S_DONE };
enum { UV_STDIN = 1, UV_RESULT = 2, UV_PLAN = 3 };
/* fds only needed until fork: the binary, the child's stdio ends, and the
 * isolation layers prepared in the parent (Landlock ruleset, cgroup.procs) */
enum { T_EXE, T_IN, T_OUT, T_ERR, T_LANDLOCK, T_CGROUP, T_STATUS, T_EGRESS, T_EGRESS_P, T_DATA,
       NTMP = T_DATA + HCP_DATA_FDS };

/* One output stream of the child. `buf` is the capture (up to max_output,
 * or nothing when capture is off); `pend` holds what arrived since the last
 * proc:take() when the caller streams. */
struct stream {
    int fd;
    int grown;                 /* the pipe was made 1 MiB */
    struct hcp_strbuf cap;     /* the captured bytes (capture) */
    int handed;                /* they became a string of a result being built */
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
    struct hcp_io io;
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
    /* netns = "pool": the call's network namespace (taken from the pool or
     * made for it), given back when the call ended on its own */
    struct hcp_netns netns;
    int netns_reuse, signalled, root;
    int status_fd;             /* hcp-init's report of the program's end, or -1 */
    struct hcp_end_report end; /* that report, once read (end_got) */
    int end_got;
    /* early_end: a `gone` report ends the call (the program can neither
     * write to hcp-init's pipe nor trace it: its capabilities are dropped
     * or it runs as another uid); our child is then reaped later */
    int early_end;
    int relayed;               /* the report comes through the intermediate */
    /* async: the exec report, read as it comes; a failure's step (-1:
     * none), errno and entry, and what names the entry (pinned by
     * UV_PLAN) */
    int report_fd, report_got;
    struct hcp_child_err report;
    int spawn_step, spawn_err, spawn_arg;
    const struct hcp_rootfs_ent *rf_e;
    int rf_n, stage_n;
    const char *stage_path[HCP_STAGE_MAX];
} proc_t;

/* spawn_io.c */
int64_t hcp_now_ns(void);
void hcp_closefd(int *fd);
/* The one cleanup path: kills and reaps a running child, closes every fd,
 * frees the buffers; idempotent. */
void hcp_proc_release(proc_t *p);
/* A child of ours that is only exiting (it does nothing more), to be
 * reaped later: at a drive pass, or by hcp_reap_late; block: wait for each
 * of them. spawn_io.c */
void hcp_reap_later(pid_t pid);
void hcp_reap_late(int block);

/* Drives n procs (and the `nextra` extras) until `need` procs are done or
 * `deadline` has passed (after at least one poll pass), or — with
 * `on_output` — after a pass in which a streaming proc received output,
 * or after a pass in which an extra asked for it. Returns 0 or poll's
 * errno. */
int hcp_proc_drive(lua_State *L, proc_t **ps, int n, int need, int64_t deadline,
                   int on_output, const struct hcp_pollable *extras, int nextra);
/* Nanoseconds until the proc's next timer event (a timeout, the kill after
 * the grace, the end of draining, exit polling), or NEVER. */
int64_t hcp_proc_next(const proc_t *p, int64_t now);

/* A namespace descriptor as a Lua value (proc:nsfd), closed by its __gc;
 * its fd, or -1 when idx is not one (or it was closed). spawn_proc.c */
void hcp_push_nsfd(lua_State *L, int fd);
int hcp_nsfd_get(lua_State *L, int idx);

/* The message of an asynchronous spawn's failure ("spawn: <step>…"), pushed. */
void hcp_push_spawn_error(lua_State *L, const proc_t *p);

/* spawn_proc.c: the proc methods, core.wait_any and core.signame. */
void hcp_register_proc(lua_State *L);

#endif
