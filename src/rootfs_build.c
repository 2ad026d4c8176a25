/* rootfs_build.c — the constructed root, built in the child (rootfs.c plans
 * it in the parent): the child's "/" is a fresh tmpfs holding only what it
 * was given, with bubblewrap's shape: a tmpfs on /tmp, pivot_root into it
 * with the old root at /.hcp-old, binds from there, then the old root
 * detached. A bind is made read-only recursively and atomically with
 * open_tree + mount_setattr + move_mount (Linux 5.12); the legacy path
 * (mount(2), then a remount of every mount under the bind, keeping the flags
 * the kernel locked in a user namespace) is the fallback and can be forced
 * (`legacy = true`) to test it. Mount points are only ever created in our
 * own tmpfs, never through a bind (RESOLVE_NO_XDEV): building a view must
 * not write to the host. Also the staging of paths for the bwrap driver.
 *
 * Runs between fork and exec (no allocation, no stdio, no Lua), in the C
 * module's fork child and in the spawn helper alike. */
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "compat.h"

#ifndef OPEN_TREE_CLOEXEC
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#endif

#define OLD "/.hcp-old"              /* the host's root while we build */

static const char *const devices[] = { "null", "zero", "full", "random", "urandom" };
static const char *const proc_ro[] = { "sys", "sysrq-trigger", "irq", "bus" };

static int under(const char *base, const char *path)
{
    return hcp_path_contains(base, path);
}

/* ---- small helpers usable in the child ---------------------------------- */

/* a, then b, then n in decimal unless n < 0, into buf (at least 128
 * bytes, every caller's strings are short); no stdio in the child. */
void hcp_join(char *buf, const char *a, const char *b, long long n)
{
    char tmp[24];
    size_t len = 0, k = 0;
    for (const char *s = a; *s; s++)
        buf[len++] = *s;
    for (const char *s = b; *s; s++)
        buf[len++] = *s;
    if (n >= 0) {
        unsigned long long v = (unsigned long long)n;
        do
            tmp[k++] = (char)('0' + v % 10);
        while ((v /= 10) != 0);
        while (k > 0)
            buf[len++] = tmp[--k];
    }
    buf[len] = '\0';
}

static void close_keep(int fd)
{
    int e = errno;
    if (fd >= 0)
        close(fd);
    errno = e;
}

static int fail_close(int a, int b)
{
    close_keep(a);
    close_keep(b);
    return -1;
}

/* ---- binding (child) ---------------------------------------------------- */

/* Mount flags a remount must keep: in a user namespace the kernel locked
 * them on the mounts it copied, and a remount that drops one fails. */
static unsigned long kept_flags(const char *path)
{
    struct statvfs sv;
    unsigned long f = 0;
    if (statvfs(path, &sv) < 0)
        return 0;
    if (sv.f_flag & ST_NOSUID) f |= MS_NOSUID;
    if (sv.f_flag & ST_NODEV) f |= MS_NODEV;
    if (sv.f_flag & ST_NOEXEC) f |= MS_NOEXEC;
    if (sv.f_flag & ST_NOATIME) f |= MS_NOATIME;
    if (sv.f_flag & ST_NODIRATIME) f |= MS_NODIRATIME;
    if (sv.f_flag & ST_RELATIME) f |= MS_RELATIME;
    if (sv.f_flag & ST_RDONLY) f |= MS_RDONLY;
    return f;
}

static unsigned long ms_of(unsigned long long set)
{
    return ((set & MOUNT_ATTR_RDONLY) ? MS_RDONLY : 0) | ((set & MOUNT_ATTR_NOSUID) ? MS_NOSUID : 0) |
           ((set & MOUNT_ATTR_NODEV) ? MS_NODEV : 0) | ((set & MOUNT_ATTR_NOEXEC) ? MS_NOEXEC : 0);
}

static int remount(const char *path, unsigned long long set)
{
    return mount(NULL, path, NULL, MS_REMOUNT | MS_BIND | kept_flags(path) | ms_of(set), NULL);
}

/* Undoes mountinfo's octal escapes (\040 for a space) in place. */
static void unescape(char *s)
{
    char *o = s;
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7' &&
            s[3] >= '0' && s[3] <= '7') {
            *o++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
            s += 3;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
}

/* The legacy remount: every mount at or under dest (they came along with
 * MS_REC), found in our mountinfo, read line by line into a stack buffer. */
static int remount_under(const char *proc, const char *dest, unsigned long long set)
{
    char path[128], buf[8192];
    size_t have = 0;
    hcp_join(path, proc, "mountinfo", -1);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return fail_close(fd, -1);
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            *nl = '\0';
            /* id parent major:minor root mountpoint ... */
            char *f = line;
            for (int k = 0; k < 4 && f; k++)
                f = strchr(f, ' ') ? strchr(f, ' ') + 1 : NULL;
            char *end = f ? strchr(f, ' ') : NULL;
            if (end) {
                *end = '\0';
                unescape(f);
                if (under(dest, f) && remount(f, set) < 0)
                    return fail_close(fd, -1);
            }
            line = nl + 1;
        }
        have = strlen(line);
        memmove(buf, line, have);
        if (r == 0)
            break;
        if (have == sizeof buf - 1)   /* a line longer than the buffer */
            return errno = ENAMETOOLONG, fail_close(fd, -1);
    }
    close(fd);
    return 0;
}

int hcp_bind_tree(int src_fd, int tgt_fd, unsigned long long set, int legacy,
                  const char *proc, const char *dest)
{
    if (!legacy) {
        int tree = (int)syscall(SYS_open_tree, src_fd, "",
                                OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
        if (tree >= 0) {
            struct hcp_mount_attr a = { set, 0, 0, 0 };
            long r = set ? syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) : 0;
            int no_setattr = r < 0 && errno == ENOSYS;
            if (r == 0 || no_setattr)
                r = syscall(SYS_move_mount, tree, "", tgt_fd, "",
                            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
            close_keep(tree);
            if (r == 0 && no_setattr && set)
                return remount_under(proc, dest, set);
            return (int)r;
        }
        if (errno != ENOSYS)
            return -1;
    }
    char s[128], t[128];
    hcp_join(s, proc, "fd/", src_fd);
    hcp_join(t, proc, "fd/", tgt_fd);
    if (mount(s, t, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -1;
    return set ? remount_under(proc, dest, set) : 0;
}

/* ---- building the view (child) ------------------------------------------ */

/* The tmpfs mounts we made (our root, /dev, the private /tmp and /dev/shm,
 * a base view's groups while it is built): the only places a mount point
 * may be created (/dev is read-only by then: only its /dev/shm takes any). */
#define MAX_OWN 16
static dev_t own_dev[MAX_OWN];
static int n_own;

static int own(int fd)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -1;
    for (int i = 0; i < n_own; i++)
        if (own_dev[i] == st.st_dev)
            return 1;
    return 0;
}

static void add_own(const char *path)
{
    struct stat st;
    if (n_own < MAX_OWN && stat(path, &st) == 0)
        own_dev[n_own++] = st.st_dev;
}

/* Creates the mount point for dest (a directory or an empty file) in our
 * tmpfs mounts, parents included, and opens it (O_PATH). Where the way
 * leaves them (into a bind, or through one of our links), nothing more is
 * created: the rest of the path must already be there, and is opened
 * inside the view. Never a directory or file made through a bind: building
 * the view writes nothing on the host. */
static int mount_point(int root, const char *dest, int isdir)
{
    char buf[PATH_MAX];
    size_t len = strlen(dest);
    if (len >= sizeof buf)
        return errno = ENAMETOOLONG, -1;
    memcpy(buf, dest, len + 1);
    int cur = dup(root);
    if (cur < 0)
        return -1;
    char *comp = buf + 1;
    for (;;) {
        char *slash = strchr(comp, '/');
        if (slash)
            *slash = '\0';
        if (slash || isdir) {
            if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
                return fail_close(cur, -1);
        } else {
            int f = openat(cur, comp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
            if (f < 0 && errno != EEXIST)
                return fail_close(cur, -1);
            close_keep(f);
        }
        int next = hcp_openat2(cur, comp, O_PATH | (slash ? O_DIRECTORY : 0), 0, RESOLVE_NO_SYMLINKS);
        if (next < 0 && errno != ELOOP)
            return fail_close(cur, -1);
        close(cur);
        int mine = next < 0 ? 0 : own(next);
        if (mine < 0)
            return fail_close(next, -1);
        if (!mine) {
            close_keep(next);
            break;
        }
        cur = next;
        if (!slash)
            return cur;
        comp = slash + 1;
    }
    return hcp_openat2(root, dest + 1, O_PATH, 0, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS);
}

static const unsigned long long RO = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
static const unsigned long long RW = MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

static int place_bind(int root, int old, const struct hcp_rootfs_ent *e, int legacy)
{
    int src = hcp_openat2(old, e->src + 1, O_PATH, 0,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (src < 0)
        return -1;
    int tgt = mount_point(root, e->dest, e->isdir);
    if (tgt < 0)
        return fail_close(src, -1);
    int r = hcp_bind_tree(src, tgt, e->rw ? RW : RO, legacy, OLD "/proc/self/", e->dest);
    int err = errno;
    close(src);
    close(tgt);
    errno = err;
    return r;
}

/* A link of the host that points at what the view shows anyway. A link
 * whose place lies inside a bind is there already, as on the host. */
static int place_link(int root, const struct hcp_rootfs_ent *e)
{
    const char *slash = strrchr(e->dest, '/');
    char parent[PATH_MAX];
    size_t plen = (size_t)(slash - e->dest);
    if (plen >= sizeof parent)
        return errno = ENAMETOOLONG, -1;
    memcpy(parent, e->dest, plen);
    parent[plen] = '\0';
    int dir = plen ? mount_point(root, parent, 1) : dup(root);
    if (dir < 0)
        return -1;
    struct stat st;
    if (fstatat(dir, slash + 1, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        close(dir);
        return 0;
    }
    int r = symlinkat(e->src, dir, slash + 1);
    close_keep(dir);
    return r;
}

static int tmpfs_at(int root, const char *dir, mode_t mode, unsigned long flags, const char *opts)
{
    if (mkdirat(root, dir + 1, mode) < 0 && errno != EEXIST)
        return -1;
    return mount("tmpfs", dir, "tmpfs", flags, opts);
}

/* /dev: a small tmpfs with the five harmless devices bound from the host,
 * the fd links, a private /dev/shm; then the tmpfs itself read-only. */
static int place_dev(int root, int old, const struct hcp_rootfs *rf)
{
    if (tmpfs_at(root, "/dev", 0755, MS_NOSUID | MS_NOEXEC | MS_NODEV, "mode=0755,size=65536") < 0)
        return -1;
    int dev = open("/dev", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dev < 0)
        return -1;
    for (size_t i = 0; i < sizeof devices / sizeof devices[0]; i++) {
        char host[128], view[128];
        hcp_join(host, "dev/", devices[i], -1);
        hcp_join(view, "/dev/", devices[i], -1);
        int src = hcp_openat2(old, host, O_PATH, 0, RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS);
        if (src < 0 && errno == ENOENT)
            continue;
        int mp = src < 0 ? -1 : openat(dev, devices[i], O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
        if (mp >= 0)
            close(mp);
        int tgt = mp < 0 ? -1 : hcp_openat2(dev, devices[i], O_PATH, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
        int r = tgt < 0 ? -1 : hcp_bind_tree(src, tgt, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, rf->legacy,
                                             OLD "/proc/self/", view);
        int err = errno;
        close_keep(src);
        close_keep(tgt);
        if (r < 0)
            return errno = err, fail_close(dev, -1);
    }
    static const char *const links[][2] = {
        { "/proc/self/fd", "fd" }, { "/proc/self/fd/0", "stdin" },
        { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" },
    };
    for (size_t i = 0; i < sizeof links / sizeof links[0]; i++)
        if (symlinkat(links[i][0], dev, links[i][1]) < 0)
            return fail_close(dev, -1);
    if (mkdirat(dev, "shm", 01777) < 0 ||
        (!rf->is_base && mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, rf->tmp_opts) < 0))
        return fail_close(dev, -1);
    add_own("/dev");
    add_own("/dev/shm");   /* a runtime whose TMPDIR is /dev/shm has its jails there */
    struct hcp_mount_attr a = { MOUNT_ATTR_RDONLY, 0, 0, 0 };
    long r = rf->legacy ? -1 : syscall(SYS_mount_setattr, dev, "", AT_EMPTY_PATH, &a, sizeof a);
    if (r < 0 && (rf->legacy || errno == ENOSYS))
        r = remount("/dev", MOUNT_ATTR_RDONLY);
    close_keep(dev);
    return (int)r;
}

/* A proc of our pid namespace, mounted while the host's is still in our
 * mount namespace (a user namespace may mount proc only then), with the
 * parts that change the kernel rather than describe a process read-only. */
static int place_proc(int root, const struct hcp_rootfs *rf)
{
    if (mkdirat(root, "proc", 0555) < 0 && errno != EEXIST)
        return -1;
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
        return -1;
    for (size_t i = 0; i < sizeof proc_ro / sizeof proc_ro[0]; i++) {
        char rel[128], abs[128];
        hcp_join(rel, "proc/", proc_ro[i], -1);
        hcp_join(abs, "/proc/", proc_ro[i], -1);
        int fd = hcp_openat2(root, rel, O_PATH, 0, RESOLVE_NO_SYMLINKS);
        if (fd < 0 && errno == ENOENT)
            continue;
        if (fd < 0 || hcp_bind_tree(fd, fd, RO | MOUNT_ATTR_NOEXEC, rf->legacy, OLD "/proc/self/", abs) < 0)
            return fail_close(fd, -1);
        close(fd);
    }
    return 0;
}

static int place(int root, int old, const struct hcp_rootfs *rf, const struct hcp_rootfs_ent *e)
{
    switch (e->kind) {
    case RF_BIND: return place_bind(root, old, e, rf->legacy);
    case RF_LINK: return place_link(root, e);
    case RF_DEV: return place_dev(root, old, rf);
    case RF_TMP:
        if (tmpfs_at(root, "/tmp", 01777, MS_NOSUID | MS_NODEV, rf->tmp_opts) < 0)
            return -1;
        add_own("/tmp");
        return 0;
    case RF_GROUP:
        if (tmpfs_at(root, e->dest, 0755, MS_NOSUID | MS_NODEV, "mode=0755,size=1048576") < 0)
            return -1;
        add_own(e->dest);
        return 0;
    case RF_SHM:   /* on a base view's /dev, read-only: the directory is there */
        if (mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, rf->tmp_opts) < 0)
            return -1;
        add_own("/dev/shm");
        return 0;
    default: return place_proc(root, rf);
    }
}

/* A base view's groups, read-only once everything is in them. */
static int seal_groups(const struct hcp_rootfs *rf)
{
    struct hcp_mount_attr a = { MOUNT_ATTR_RDONLY, 0, 0, 0 };
    for (int i = 0; i < rf->n; i++) {
        if (rf->e[i].kind != RF_GROUP)
            continue;
        int fd = open(rf->e[i].dest, O_PATH | O_DIRECTORY | O_CLOEXEC);
        long r = fd < 0 ? -1 : syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &a, sizeof a);
        if (r < 0 && fd >= 0 && errno == ENOSYS)
            r = remount(rf->e[i].dest, MOUNT_ATTR_RDONLY);
        close_keep(fd);
        if (r < 0)
            return -1;
    }
    return 0;
}

/* Detaches the old root (the host's, or a base view's copy) and makes ours
 * read-only. */
static int finish(const struct hcp_rootfs *rf, int root, int old)
{
    close(old);
    if (umount2(OLD, MNT_DETACH) < 0 || rmdir(OLD) < 0)
        return fail_close(root, -1);
    struct hcp_mount_attr a = { MOUNT_ATTR_RDONLY, 0, 0, 0 };
    long r = rf->legacy ? -1 : syscall(SYS_mount_setattr, root, "", AT_EMPTY_PATH, &a, sizeof a);
    if (r < 0 && (rf->legacy || errno == ENOSYS))
        r = mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL);
    close_keep(root);
    return r < 0 ? -1 : chdir("/");
}

/* A tmpfs on /tmp pivoted into, the old root at OLD; both opened. */
static int new_root(int *root, int *old)
{
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576") < 0)
        return -1;
    if (mkdir("/tmp" OLD, 0700) < 0 || syscall(SYS_pivot_root, "/tmp", "/tmp" OLD) < 0 || chdir("/") < 0)
        return -1;
    *old = open(OLD, O_PATH | O_DIRECTORY | O_CLOEXEC);
    *root = *old < 0 ? -1 : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*root < 0)
        return fail_close(*old, -1);
    n_own = 0;
    add_own("/");
    return 0;
}

int hcp_rootfs_build(const struct hcp_rootfs *rf, int *where)
{
    int root, old;
    if (hcp_rootfs_begin(rf, &root, &old, where) < 0)
        return -1;
    return hcp_rootfs_end(rf, NULL, root, old, where);
}

int hcp_rootfs_begin(const struct hcp_rootfs *rf, int *root, int *old, int *where)
{
    *where = RF_AT_SETUP;
    /* Nothing we mount may propagate to the host, nor the host's to us. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 || new_root(root, old) < 0)
        return -1;
    for (int i = 0; i < rf->n; i++) {
        *where = i;
        if (place(*root, *old, rf, &rf->e[i]) < 0)
            return fail_close(*old, *root);
    }
    return 0;
}

int hcp_rootfs_end(const struct hcp_rootfs *rf, const unsigned char *done, int root, int old, int *where)
{
    for (int i = 0; done && i < rf->n; i++) {
        *where = i;
        if (!done[i] && place(root, old, rf, &rf->e[i]) < 0)
            return fail_close(old, root);
    }
    *where = RF_AT_FINISH;
    if (seal_groups(rf) < 0)
        return fail_close(old, root);
    return finish(rf, root, old);
}

/* ---- a view begun before its call's plan (the early child) -------------- */

static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static int same_ent(const struct hcp_rootfs_ent *a, const struct hcp_rootfs_ent *b)
{
    return a->kind == b->kind && a->rw == b->rw && a->isdir == b->isdir && same_str(a->dest, b->dest) &&
           same_str(a->src, b->src);
}

/* at or above: `a` is `b` or one of its parents */
static int at_or_above(const char *a, const char *b)
{
    size_t n = strlen(a);
    if (n == 1 && a[0] == '/')
        return 1;
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

int hcp_rootfs_extends(const struct hcp_rootfs *e, const struct hcp_rootfs *p, unsigned char *done)
{
    if (e->legacy != p->legacy || strcmp(e->tmp_opts, p->tmp_opts) != 0 || e->base || p->base || e->is_base ||
        p->is_base || p->n > HCP_EARLY_MAX)
        return 0;
    int pos[HCP_EARLY_MAX], j = 0;
    for (int i = 0; i < p->n; i++)
        done[i] = 0;
    /* every entry built ahead is one of the plan's, in the plan's order */
    for (int i = 0; i < e->n; i++) {
        while (j < p->n && !same_ent(&e->e[i], &p->e[j]))
            j++;
        if (j == p->n)
            return 0;
        done[j] = 1;
        pos[i] = j++;
    }
    /* and the plan's own entries go where the plan order puts them: none at
     * or above one built ahead (it would have gone under it), none beneath
     * one built ahead that the plan places after it */
    for (int k = 0; k < p->n; k++) {
        if (done[k])
            continue;
        for (int i = 0; i < e->n; i++) {
            if (!p->e[k].dest || !e->e[i].dest || at_or_above(p->e[k].dest, e->e[i].dest))
                return 0;
            if (at_or_above(e->e[i].dest, p->e[k].dest) && pos[i] > k)
                return 0;
        }
    }
    return 1;
}

/* ---- building on a base view (child) ------------------------------------ */

/* A detached copy of the host path of e (opened beneath our root, no link
 * followed), with e's mount attributes: cloned before we leave the mount
 * namespace the host's paths are in. */
static int clone_tree(int host, const struct hcp_rootfs_ent *e)
{
    int src = hcp_openat2(host, e->src + 1, O_PATH, 0,
                          RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
    if (src < 0)
        return -1;
    int tree = (int)syscall(SYS_open_tree, src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
    close_keep(src);
    if (tree < 0)
        return -1;
    struct hcp_mount_attr a = { e->rw ? RW : RO, 0, 0, 0 };
    if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
        return fail_close(tree, -1);
    return tree;
}

/* The base's top-level entries, into our root from its copy at `old`. */
static int take_base(int root, int old, const struct hcp_rootfs *rf)
{
    for (int i = 0; i < rf->nbase; i++) {
        const struct hcp_base_item *b = &rf->base[i];
        if (b->link) {
            if (symlinkat(b->link, root, b->name) < 0)
                return -1;
            continue;
        }
        int made;
        if (b->isdir) {
            made = mkdirat(root, b->name, 0755);
        } else {
            int f = openat(root, b->name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
            made = f < 0 ? -1 : close(f);
        }
        if (made < 0 || syscall(SYS_move_mount, old, b->name, root, b->name, 0) < 0)
            return -1;
    }
    return 0;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++)
        close_keep(fds[i]);
}

#define MAX_CALL_BINDS 64

/* A fresh tmpfs mounted over the root of the base's copy and chrooted into
 * (switch_root's way): unlike pivot_root, nothing has to be unmounted after
 * (an unmount waits for an RCU grace period, up to milliseconds on an idle
 * machine). The base's root stays under ours, reachable only through *old,
 * kept open to move the base's entries out of it; once they are, it holds
 * nothing but the empty directories they were mounted on. */
static int root_over_base(int *root, int *old)
{
    *old = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*old < 0)
        return -1;
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576") < 0 ||
        chdir("/tmp") < 0 || mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0 || chdir("/") < 0)
        return fail_close(*old, -1);
    *root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*root < 0)
        return fail_close(*old, -1);
    n_own = 0;
    add_own("/");
    return 0;
}

int hcp_rootfs_build_on(const struct hcp_rootfs *rf, int *where)
{
    int trees[MAX_CALL_BINDS], root, old, host = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    *where = RF_AT_SETUP;
    if (host < 0 || rf->n > MAX_CALL_BINDS)
        return errno = host < 0 ? errno : E2BIG, fail_close(host, -1);
    for (int i = 0; i < rf->n; i++) {
        *where = i;
        trees[i] = rf->e[i].kind == RF_BIND ? clone_tree(host, &rf->e[i]) : -1;
        if (rf->e[i].kind == RF_BIND && trees[i] < 0)
            return close_all(trees, i), fail_close(host, -1);
    }
    close(host);
    *where = RF_AT_SETUP;
    if (setns(rf->base_fd, CLONE_NEWNS) < 0 || unshare(CLONE_NEWNS) < 0 || root_over_base(&root, &old) < 0)
        return close_all(trees, rf->n), -1;
    if (take_base(root, old, rf) < 0)
        return close_all(trees, rf->n), fail_close(old, root);
    /* The base's /dev, read-only, is the way to the call's own /dev/shm, as
     * a view built from nothing has its /dev: a mount point under /dev/shm
     * (a runtime whose TMPDIR is there has its jails there) is made in the
     * private tmpfs; nothing can be made in /dev itself (EROFS). */
    add_own("/dev");
    for (int i = 0; i < rf->n; i++) {
        *where = i;
        int r, tgt;
        if (rf->e[i].kind != RF_BIND) {
            r = place(root, old, rf, &rf->e[i]);
        } else if ((tgt = mount_point(root, rf->e[i].dest, rf->e[i].isdir)) < 0) {
            r = -1;
        } else {
            r = (int)syscall(SYS_move_mount, trees[i], "", tgt, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
            close_keep(tgt);
        }
        if (r < 0)
            return close_all(trees, rf->n), fail_close(old, root);
    }
    close_all(trees, rf->n);
    *where = RF_AT_FINISH;
    close(old);   /* the base's copy, under our root: nothing is left in it but empty directories */
    struct hcp_mount_attr a = { MOUNT_ATTR_RDONLY, 0, 0, 0 };
    long r = syscall(SYS_mount_setattr, root, "", AT_EMPTY_PATH, &a, sizeof a);
    close_keep(root);
    return r < 0 ? -1 : chdir("/");
}

/* ---- staging for a process that builds its own view --------------------- */

int hcp_stage_build(const struct hcp_stage *st, int *where)
{
    int fds[HCP_STAGE_MAX];
    *where = -1;
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    for (int i = 0; i < st->n; i++) {
        *where = i;
        if (st->e[i].beneath) {
            int b = open(st->e[i].beneath, O_PATH | O_DIRECTORY | O_CLOEXEC);
            fds[i] = b < 0 ? -1 : hcp_openat2(b, st->e[i].rel, O_PATH, 0,
                                              RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS);
            close_keep(b);
        } else {   /* the runtime's own paths, the operator's: followed as given */
            fds[i] = open(st->e[i].path, O_PATH | O_CLOEXEC);
        }
        if (fds[i] < 0)
            return -1;
    }
    *where = -1;
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=65536") < 0)
        return -1;
    int tmp = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (tmp < 0)
        return -1;
    for (int i = 0; i < st->n; i++) {
        char name[128];
        struct stat sb;
        *where = i;
        hcp_join(name, "", "", (long long)i + 1);
        int r = fstat(fds[i], &sb);
        if (r == 0 && S_ISDIR(sb.st_mode)) {
            r = mkdirat(tmp, name, 0755);
        } else if (r == 0) {
            int f = openat(tmp, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
            r = f < 0 ? -1 : close(f);
        }
        int tgt = r < 0 ? -1 : hcp_openat2(tmp, name, O_PATH, 0, RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
        if (tgt < 0 || hcp_bind_tree(fds[i], tgt, 0, 0, "/proc/self/", "/tmp") < 0)
            return fail_close(tgt, tmp);
        close(tgt);
        close(fds[i]);
    }
    close(tmp);
    return 0;
}
