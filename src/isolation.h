/* isolation.h — the isolation layers of core.spawn (§10.4): what the caller
 * asked for, what the parent prepared before fork, and the steps the fork
 * child applies. isolation.c reads the option, prepares it and answers
 * core.probe; isolation_child.c holds the steps, written to run between fork
 * and exec (no allocation, no stdio, no Lua). */
#ifndef HCP_ISOLATION_H
#define HCP_ISOLATION_H

#include "hcp_core.h"

#include <sys/types.h>

enum {
    ISO_LANDLOCK = 1 << 0, ISO_SECCOMP = 1 << 1, ISO_NETNS = 1 << 2,
    ISO_PIDNS = 1 << 3, ISO_CAPS = 1 << 4, ISO_RLIMITS = 1 << 5,
    ISO_CGROUP = 1 << 6,
};

#define HCP_NRLIMITS 5
#define HCP_PROC_RULES 8

struct hcp_rlim { int resource; unsigned long long value; };

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
};

/* ---- parent side (isolation.c) ------------------------------------------ */

/* Reads opts.isolation (opts at stack index `opts`) into *iso. A caller's
 * mistake raises; a refusal (a NUL byte in a path) leaves its message on the
 * stack and returns -1; else 0. The stack is left as found otherwise. */
int hcp_iso_check(lua_State *L, int opts, struct hcp_isolation *iso);

/* Prepares what the parent can before fork: the Landlock ruleset and the
 * cgroup.procs descriptor, stored into *landlock_fd and *cgroup_fd as soon
 * as they are open (the caller closes them). Returns 0, or an errno with
 * "spawn: isolation: <layer>: <reason>" pushed. */
int hcp_iso_prepare(lua_State *L, int opts, struct hcp_isolation *iso,
                    int *landlock_fd, int *cgroup_fd);

/* core.probe() (isolation_probe.c) */
int hcp_probe(lua_State *L);

/* ---- Landlock, seccomp (isolation_child.c) ------------------------------ */

/* The running kernel's Landlock ABI (>= 1), or -1 with errno set. */
int hcp_landlock_abi(void);

/* Access rights the ABI knows: for `read` paths, `write` paths, and the
 * subset that applies to a file rather than a directory. */
unsigned long long hcp_landlock_rights(int abi, int which);
enum { LL_HANDLED, LL_READ, LL_WRITE, LL_FILE };

/* Adds the rule for path (LL_READ or LL_WRITE; file rights only for a
 * file); a path that does not exist is skipped. 0, or -1 with errno. */
int hcp_landlock_add(int ruleset_fd, const char *path, int which, int abi);

/* ---- the steps in the child (isolation_child.c) ------------------------- */
/* Each returns 0 or -1 with errno set. */

int hcp_iso_cgroup_join(int cgroup_fd);
int hcp_iso_userns(const struct hcp_isolation *iso);
int hcp_iso_netns(void);
int hcp_iso_pidns_unshare(void);
int hcp_iso_pidns_mounts(void);   /* in the grandchild, pid 1 */
int hcp_iso_rlimits(const struct hcp_isolation *iso);
int hcp_iso_caps(int cap_last);
int hcp_iso_landlock(const struct hcp_isolation *iso, int ruleset_fd);
int hcp_iso_seccomp(void);        /* -1/ENOSYS off x86_64 */

/* Whether the seccomp filter exists for this architecture. */
int hcp_iso_seccomp_supported(void);

#endif
