/* isolation.h — the isolation layers of core.spawn (§10.4): what the caller
 * asked for, what the parent prepared before fork, and the steps the fork
 * child applies. isolation.c reads the option, prepares it and answers
 * core.probe; isolation_child.c holds the steps, written to run between fork
 * and exec (no allocation, no stdio, no Lua). */
#ifndef HCP_ISOLATION_H
#define HCP_ISOLATION_H

#include "hcp_core.h"

#include <sched.h>
#include <sys/types.h>

enum {
    ISO_LANDLOCK = 1 << 0, ISO_SECCOMP = 1 << 1, ISO_NETNS = 1 << 2,
    ISO_PIDNS = 1 << 3, ISO_CAPS = 1 << 4, ISO_RLIMITS = 1 << 5,
    ISO_CGROUP = 1 << 6, ISO_ROOTFS = 1 << 7, ISO_IPCNS = 1 << 8,
    ISO_RUN_AS = 1 << 9, ISO_STAGE = 1 << 10, ISO_PIDS_MAX = 1 << 11,
    ISO_USERNS = 1 << 12,   /* a key only: userns = fd */
    ISO_EGRESS = 1 << 13,   /* issue 14: the call's proxy listens in its netns */
};

/* pids_max: what a pid namespace's pid_max can express (Linux refuses less
 * than 301, and has at most 4194304 pids) */
#define HCP_PIDS_MAX_MIN 300
#define HCP_PIDS_MAX_MAX 4194303

#define HCP_NRLIMITS 5
#define HCP_PROC_RULES 8
#define HCP_STAGE_MAX 16

struct hcp_rlim { int resource; unsigned long long value; };

/* The constructed root (rootfs.c): what the child's "/" holds, planned in
 * the parent (sorted so a directory comes before what is mounted inside
 * it, sources resolved), built in the child. */
/* RF_GROUP: a tmpfs of a base view at a top-level directory whose entries
 * lie deeper (/etc, /sys), so a call can take it whole; RF_SHM: a call's
 * own /dev/shm on a base view's /dev. */
enum { RF_BIND, RF_LINK, RF_DEV, RF_TMP, RF_PROC, RF_GROUP, RF_SHM };
struct hcp_rootfs_ent {
    const char *dest;   /* where in the child's view: the host path asked for */
    const char *src;    /* RF_BIND: the host's real path; RF_LINK: the link's target */
    unsigned char kind, rw, isdir;
    unsigned char base; /* while planning on a base view: one of its entries */
};
/* A top-level entry of a base view, which each call's root takes: a mount
 * moved in (`link` NULL), or a link made again. */
struct hcp_base_item { const char *name, *link; unsigned char isdir; };
struct hcp_rootfs {
    int n;
    struct hcp_rootfs_ent *e;   /* pinned by the table hcp_iso_prepare leaves */
    int legacy;                 /* mount(2) and remounts only (the pre-5.12 path) */
    char tmp_opts[64];          /* tmpfs options of /tmp and /dev/shm */
    /* Built on a base view (rootfs_base.c): e holds the call's own entries
     * only, the rest comes from the base's mount namespace. */
    int base_fd;                /* that namespace, or -1 */
    int is_base;                /* building a base view: no /dev/shm of its own */
    int nbase;
    const struct hcp_base_item *base;
};

/* Paths made reachable for a process that drops privileges before it
 * builds its own view (the bwrap driver): path i (1-based) is bound at
 * /tmp/<i> of a private mount namespace. `beneath`: opened beneath that
 * directory, refusing any escape (a relative wrap.bin). */
struct hcp_stage {
    int n;
    struct { const char *path, *beneath, *rel; } e[HCP_STAGE_MAX];
};

struct hcp_isolation {
    unsigned layers;                    /* ISO_* asked for */
    int nrlim;
    struct hcp_rlim rlim[HCP_NRLIMITS]; /* soft = hard = value */
    /* filled by hcp_iso_prepare in the parent */
    int landlock_fd, cgroup_fd;         /* owned by the caller's proc, -1 if unused */
    int userns;                         /* not root and a namespace asked for */
    uid_t uid;
    gid_t gid;
    int cap_last;                       /* /proc/sys/kernel/cap_last_cap, or -1 */
    /* Landlock paths on procfs: opened in the parent they would name the
     * runtime's /proc/self and the host's proc (hidden by a pid namespace's
     * own), so the child adds their rules itself, after its mounts. */
    int landlock_abi, nproc_rules;
    struct { const char *path; int which; } proc_rules[HCP_PROC_RULES];
    int ll_fs, ll_tcp, ll_scopes;       /* what the Landlock ruleset handles */
    unsigned pid_max;                   /* pids_max + 1: the pid namespace's pid_max */
    /* netns = fd, or one from the pool: setns into it rather than unshare;
     * userns = fd: joined rather than made (a non-root runtime's netns fd
     * belongs to one). -1: not given. Owned by the caller. */
    int netns_fd, userns_fd;
    int netns_pool;                     /* netns = "pool" (spawn.c, netns_pool.c) */
    uid_t run_uid;                      /* run_as */
    gid_t run_gid;
    struct hcp_rootfs rootfs;
    struct hcp_stage stage;
    /* issue 14: isolation.egress, the proxy (egress.h), and the child's end
     * of the socketpair its listeners go back through */
    struct hcp_egress *egress;
    int egress_fd;
};

/* ---- parent side (isolation.c) ------------------------------------------ */

/* Reads opts.isolation (opts at stack index `opts`) into *iso. A caller's
 * mistake raises; a refusal (a NUL byte in a path) leaves its message on the
 * stack and returns -1; else 0. The stack is left as found otherwise. */
int hcp_iso_check(lua_State *L, int opts, struct hcp_isolation *iso);

/* Prepares what the parent can before fork: the Landlock ruleset and the
 * cgroup.procs descriptor, stored into *landlock_fd and *cgroup_fd as soon
 * as they are open (the caller closes them); the plan of the constructed
 * root. Returns 0 with one value pushed (a table pinning the plan's
 * strings, to keep until the fork), or an errno with
 * "spawn: isolation: <layer>: <reason>" pushed. */
int hcp_iso_prepare(lua_State *L, int opts, struct hcp_isolation *iso,
                    int *landlock_fd, int *cgroup_fd);

/* Checks the table at `list` is an array of absolute paths (a caller's
 * mistake raises, naming `what`, or `each` for one path); a NUL byte pushes
 * a refusal and returns -1. */
int hcp_iso_path_list(lua_State *L, int list, const char *what, const char *each);

/* core.probe() (isolation_probe.c) */
int hcp_probe(lua_State *L);
int hcp_probe_source(lua_State *L);
size_t hcp_probe_blob_size(void);
/* The layers an early child may make ahead on this host (early.c; probed
 * now unless this process has the answer): a constructed root, pid and IPC
 * namespaces, a pid_max of a pid namespace's own (else a call's `procs`
 * joins a cgroup, a step that comes before them), and a network namespace
 * where there are any. 0: none. */
unsigned hcp_probe_early_layers(void);

/* The probe's cache (probe_cache.c): the key of this process (-1: none
 * fits), the file for it (-1: no cache here, or HCP_PROBE_CACHE=0), and
 * reading (-1: none, or not to be trusted) and writing the answer. */
int hcp_probe_key(char *key, size_t size);
int hcp_probe_cache_path(const char *key, char *path, size_t size);
int hcp_probe_cache_read(const char *path, const char *key, void *blob, size_t blob_size);
int hcp_probe_cache_write(const char *path, const char *key, const void *blob, size_t blob_size);
/* The per-boot caches' directory (probe_cache.c): $HCP_RUNTIME_DIR, else
 * /run/hcp-lua for root, $XDG_RUNTIME_DIR/hcp-lua otherwise — made if
 * missing, and only if it is ours alone (0700). 0, or -1: no cache here. */
int hcp_runtime_dir(char *dir, size_t size);
int hcp_own_dir(const char *dir);
unsigned long long hcp_fnv1a(const char *s);
/* A file of those caches written whole or not at all (a private temporary
 * renamed into place): 0, or -1 with nothing left behind. */
struct iovec;
int hcp_cache_write(const char *path, const struct iovec *iov, int n);

/* ---- network namespaces kept for reuse (netns_pool.c) -------------------- */

/* A pooled network namespace (and, for a non-root runtime, the user
 * namespace that owns it), or { -1, -1 }. */
struct hcp_netns { int net, user; };
struct hcp_netns hcp_netns_take(int root);
/* A namespace made ahead from the process's start (hcp run): what
 * core.netns_prefill does, and the holder ended at exit if no call took it. */
void hcp_netns_prefill_early(void);
/* The early child (early.c): started by `hcp run` and hcpx before their
 * modules load (root only; HCP_EARLY=0 turns it off), ended unused by
 * hcp_early_cancel (its socket closed, SIGKILL, reaped later). */
int hcp_early_start(lua_State *L);
/* 1 while an early child waits for its call (whose network namespace it
 * makes: the netns pool makes none ahead then). */
int hcp_early_pending(void);
void hcp_early_cancel(void);
/* Moves helper `pid` off the CPU we run on, onto the others we may use
 * (*mine: our mask, to give back). 1 if it was moved; 0 with one CPU, or
 * when it could not be. */
int hcp_pin_away(pid_t pid, cpu_set_t *mine);
/* Gives one back (or closes it when the pool is full). */
void hcp_netns_give(struct hcp_netns ns, int root);
/* The namespaces a running child is in: /proc/<pid>/ns/net (and user). */
struct hcp_netns hcp_netns_of(pid_t pid, int with_user);
/* core.netns_prefill / core.netns_prefill_cancel (a namespace made ahead). */
void hcp_register_netns_pool(lua_State *L);
void hcp_register_early(lua_State *L);
void hcp_register_hostsock(lua_State *L);
void hcp_register_rootfs(lua_State *L);

/* ---- the constructed root (rootfs.c) ------------------------------------ */

/* Reads isolation.rootfs = { ro =, rw =, tmp_mb =, legacy = } (raises on a
 * mistake; -1 with a refusal pushed). */
int hcp_rootfs_check(lua_State *L, int t);
/* Plans it into *rf (strings pinned in the table at `pin`); /proc is part
 * of it only with a pid namespace. 0, or an errno with the message pushed. */
int hcp_rootfs_prepare(lua_State *L, int t, int pin, int with_proc, struct hcp_rootfs *rf);
/* HCP_ROOTFS_FRESH (nothing pushed): the call's view cannot be built on the
 * base view (a path in one of its shared directories, or hiding one of its
 * entries); the caller plans it fresh. */
#define HCP_ROOTFS_FRESH (-2)
/* A call's plan, on a base view's (base: *rf gets the call's own entries
 * only; may answer HCP_ROOTFS_FRESH) or from nothing (base NULL), and in
 * both every listening unix socket of the host that the view would show
 * hidden under a read-only /dev/null (hostsock.c) — but a path the call
 * lists itself (a granted socket). 0, or an errno with the message pushed. */
int hcp_rootfs_prepare_call(lua_State *L, int t, int pin, int with_proc, const struct hcp_rootfs *base,
                            struct hcp_rootfs *rf);

/* The real path of `path`, whose last component is no link: its
 * directory's (every link followed), joined to that component, into out.
 * The last directory resolved is remembered in m (have = 0 to start).
 * 0, or -1 with errno. rootfs.c: a view's paths, the host's sockets. */
struct hcp_dir_memo { int have; char dir[PATH_MAX], real[PATH_MAX]; };
int hcp_real_in_dir(const char *path, struct hcp_dir_memo *m, char *out, size_t size);

/* ---- the host's unix sockets (hostsock.c) ------------------------------- */

/* The real paths of the listening pathname unix sockets of this network
 * namespace (/proc/net/unix) that are sockets here — with `within` (n real
 * directory paths), only those strictly inside one of them: 0, or -1 with
 * errno. */
struct hcp_socklist { int n; char **path; };
int hcp_host_sockets(struct hcp_socklist *out, const char *const *within, int nwithin);
void hcp_socklist_free(struct hcp_socklist *l);

/* In the child, in a fresh mount namespace: builds the root and pivots into
 * it. -1 with errno, *where the entry that failed (or RF_AT_*). */
enum { RF_AT_SETUP = -1, RF_AT_FINISH = -2 };
int hcp_rootfs_build(const struct hcp_rootfs *rf, int *where);
/* The same in two steps: begin mounts the new root and places every entry
 * of rf (pivoted into, the old root still open: *root, *old); end places
 * the entries of rf not marked in `done` (NULL: none left), then seals and
 * detaches the old root. */
int hcp_rootfs_begin(const struct hcp_rootfs *rf, int *root, int *old, int *where);
int hcp_rootfs_end(const struct hcp_rootfs *rf, const unsigned char *done, int root, int old, int *where);
/* Whether the view p can be finished on the view e built ahead (the early
 * child, early.c): every entry of e is one of p's, in p's order, with the
 * same options, and each of p's other entries can be placed after them
 * (none at or above one of e's, none beneath one of e's that p places
 * later). 1 with done[i] set for p's entries e built, or 0. At most
 * HCP_EARLY_MAX entries in p. */
#define HCP_EARLY_MAX 256
int hcp_rootfs_extends(const struct hcp_rootfs *e, const struct hcp_rootfs *p, unsigned char *done);
/* The same on rf->base_fd: the call's binds cloned from the mount namespace
 * we are in, then a copy of the base's, a fresh root taking the base's
 * top-level entries, the call's own entries, pivoted into. */
int hcp_rootfs_build_on(const struct hcp_rootfs *rf, int *where);
/* What `where` names, for the error message. */
const char *hcp_rootfs_where(const struct hcp_rootfs *rf, int where);

/* a, then b, then n in decimal unless n < 0, into buf (at least 128 bytes;
 * no stdio in the child). rootfs_build.c */
void hcp_join(char *buf, const char *a, const char *b, long long n);

/* rootfs.base (rootfs_base.c): the base view at idx, checked against the
 * host (rebuilt when what it binds changed): *rf gets its plan, namespace
 * and items. -1 (nothing pushed) when it cannot be had: plan fresh. */
int hcp_base_for_call(lua_State *L, int idx, struct hcp_rootfs *rf);
/* Pushes the `ro` list the base at idx was made from. */
int hcp_base_ro(lua_State *L, int idx);
void hcp_register_viewbase(lua_State *L);

/* isolation.stage = { path | { path =, beneath = }, ... } */
int hcp_stage_check(lua_State *L, int t, struct hcp_stage *st);
/* In the child: a private mount namespace with each path at /tmp/<i>. */
int hcp_stage_build(const struct hcp_stage *st, int *where);

/* Binds the tree at src_fd onto tgt_fd (both opened in the current mount
 * namespace) with MOUNT_ATTR_* `set` applied to every mount of it; the
 * mount API where the kernel has it, else mount(2) through `proc` (a
 * "/proc/self/fd" of this process) and remounts. */
int hcp_bind_tree(int src_fd, int tgt_fd, unsigned long long set, int legacy,
                  const char *proc, const char *dest);

/* ---- Landlock, seccomp (isolation_child.c) ------------------------------ */

/* The running kernel's Landlock ABI (>= 1), or -1 with errno set. */
int hcp_landlock_abi(void);

/* Access rights the ABI knows: for `read` paths, `write` paths, and the
 * subset that applies to a file rather than a directory. */
unsigned long long hcp_landlock_rights(int abi, int which);
enum { LL_HANDLED, LL_READ, LL_WRITE, LL_FILE };

/* landlock.base (landlock_base.c): adds the rules of the base at idx to
 * the ruleset, reopening its paths first when the host changed. 0, or -1
 * with errno. */
int hcp_landlock_base_add(lua_State *L, int idx, int ruleset, int abi);
void hcp_register_landlock_base(lua_State *L);

/* Adds the rule for path (LL_READ or LL_WRITE; file rights only for a
 * file); a path that does not exist is skipped. 0, or -1 with errno. */
int hcp_landlock_add(int ruleset_fd, const char *path, int which, int abi);

/* ---- the steps in the child (isolation_child.c) ------------------------- */
/* Each returns 0 or -1 with errno set. */

int hcp_iso_cgroup_join(int cgroup_fd);
int hcp_iso_userns(const struct hcp_isolation *iso);
int hcp_iso_netns(const struct hcp_isolation *iso);
/* mntns: with a mount namespace (for hcp-init's own /proc or a fresh view) */
int hcp_iso_pidns_unshare(int mntns);
int hcp_iso_pidns_mounts(void);   /* in the grandchild, pid 1 */
/* In pid 1 of the new pid namespace: its pid_max (per namespace since Linux
 * 6.14; the write goes to the writer's namespace, through any proc). */
int hcp_iso_pid_max(unsigned pid_max);
/* The same through an fd of /proc/sys/kernel/pid_max opened earlier in the
 * namespace (the early child: its view hides /proc/sys by then). */
int hcp_iso_pid_max_fd(int fd, unsigned pid_max);
int hcp_iso_ipcns(void);
int hcp_iso_rlimits(const struct hcp_isolation *iso);
/* run_as without caps: setgroups, setresgid, setresuid (the kernel then
 * clears the capabilities of a former root), checked. */
int hcp_iso_run_as(const struct hcp_isolation *iso);
/* With run_as (iso not NULL) the ids change between the bounding-set drop
 * (which needs CAP_SETPCAP) and the capset that empties every set. */
int hcp_iso_caps(int cap_last, const struct hcp_isolation *run_as);
int hcp_iso_landlock(const struct hcp_isolation *iso, int ruleset_fd);
int hcp_iso_seccomp(void);        /* -1/ENOSYS off x86_64 */

/* Whether the seccomp filter exists for this architecture. */
int hcp_iso_seccomp_supported(void);

#endif
