/* rootfs.c — the constructed root (isolation layer `rootfs`): the child's
 * "/" is a fresh tmpfs holding only what it was given — read-only binds of
 * the system paths and the pack, read-write binds of its jail and private
 * directory, each at its host path so argv paths stay valid; a minimal
 * /dev; a private /tmp and /dev/shm; its own /proc (with /proc/sys and its
 * like read-only) when it has a pid namespace, none otherwise. Nothing else
 * of the host is there: no /home, /root, /run, /var, host /tmp, state dir,
 * sockets, other jails.
 *
 * The parent plans (hcp_rootfs_prepare: paths normalised, symlinks and
 * real paths resolved, sorted so a directory is mounted before what goes
 * inside it); the child builds, with bubblewrap's shape: a tmpfs on /tmp,
 * pivot_root into it with the old root at /.hcp-old, binds from there,
 * then the old root detached. A bind is made read-only recursively and
 * atomically with open_tree + mount_setattr + move_mount (Linux 5.12); the
 * legacy path (mount(2), then a remount of every mount under the bind,
 * keeping the flags the kernel locked in a user namespace) is the fallback
 * and can be forced (`legacy = true`) to test it. Mount points are only
 * ever created in our own tmpfs, never through a bind (RESOLVE_NO_XDEV):
 * building a view must not write to the host. Also the staging of paths
 * for the bwrap driver (hcp_stage_*). */
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
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

#define RF_MAX 4096                  /* entries: a caller's mistake beyond */
#define OLD "/.hcp-old"              /* the host's root while we build */
#define DEFAULT_TMP_MB 64

static const char *const devices[] = { "null", "zero", "full", "random", "urandom" };
static const char *const proc_ro[] = { "sys", "sysrq-trigger", "irq", "bus" };

/* ---- small helpers usable in the child ---------------------------------- */

/* a, then b, then n in decimal unless n < 0, into buf (at least 128
 * bytes, every caller's strings are short); no stdio in the child. */
static void join(char *buf, const char *a, const char *b, long long n)
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

/* ---- reading the option (parent) ---------------------------------------- */

int hcp_rootfs_check(lua_State *L, int t)
{
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: rootfs must be a table");
    lua_pushnil(L);
    while (lua_next(L, t)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(k, "ro") == 0 || strcmp(k, "rw") == 0) {
            if (hcp_iso_path_list(L, lua_gettop(L), k[1] == 'o' ? "rootfs.ro" : "rootfs.rw", "rootfs path") < 0)
                return -1;
        } else if (strcmp(k, "tmp_mb") == 0) {
            if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > (1 << 20))
                luaL_error(L, "spawn: isolation: rootfs.tmp_mb must be an integer from 1 to 1048576");
        } else if (strcmp(k, "legacy") == 0) {
            if (!lua_isboolean(L, -1))
                luaL_error(L, "spawn: isolation: rootfs.legacy must be a boolean");
        } else {
            luaL_error(L, "spawn: isolation: rootfs: unknown key '%s' (ro, rw, tmp_mb, legacy)",
                       luaL_tolstring(L, -2, NULL));
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* ---- planning it (parent) ----------------------------------------------- */

static int rf_error(lua_State *L, int err, const char *path, const char *what)
{
    if (what)
        lua_pushfstring(L, "spawn: isolation: rootfs: %s: %s", path, what);
    else
        lua_pushfstring(L, "spawn: isolation: rootfs: %s: %s", path, strerror(err));
    return err;
}

/* Pushes s into the pin table and returns the pinned copy. */
static const char *pin_str(lua_State *L, int pin, const char *s)
{
    lua_pushstring(L, s);
    const char *p = lua_tostring(L, -1);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    return p;
}

static int under(const char *base, const char *path)
{
    return hcp_path_contains(base, path);
}

/* The paths under /dev and /proc are the layer's own; "/" would be the
 * host's root again. */
static const char *reserved(const char *p)
{
    if (strcmp(p, "/") == 0)
        return "the host's root cannot be part of the view";
    if ((under("/dev", p) && !(under("/dev/shm", p) && strcmp(p, "/dev/shm") != 0)) ||
        under("/proc", p) || strcmp(p, "/tmp") == 0)
        return "reserved: the view has its own /dev, /proc and /tmp";
    return NULL;
}

/* One path of ro or rw into e (kind, src, isdir); returns 1 when it is
 * there, 0 when it is an optional path the host lacks, or an errno with the
 * message pushed. A final symlink of a ro path is kept as a link, decided
 * in link_or_bind once every entry is known. */
static int plan_one(lua_State *L, int pin, const char *given, int rw, struct hcp_rootfs_ent *e)
{
    char norm[PATH_MAX], *real;
    struct stat st;
    if (hcp_path_normalize(given, norm, sizeof norm) < 0)
        return rf_error(L, ENAMETOOLONG, given, NULL);
    const char *bad = reserved(norm);
    if (bad)
        return rf_error(L, EINVAL, norm, bad);
    if (lstat(norm, &st) < 0) {
        if ((errno == ENOENT || errno == ENOTDIR) && !rw)
            return 0;   /* /lib32 and its like: not on every host */
        return rf_error(L, errno, norm, NULL);
    }
    if (S_ISLNK(st.st_mode) && rw)
        return rf_error(L, ELOOP, norm, "a read-write path must not be a symlink");
    if (!(real = realpath(norm, NULL))) {
        if (errno == ENOENT && !rw)
            return 0;   /* a dangling link */
        return rf_error(L, errno, norm, NULL);
    }
    e->dest = pin_str(L, pin, norm);
    e->src = pin_str(L, pin, real);
    free(real);
    if (strcmp(e->src, "/") == 0)
        return rf_error(L, EINVAL, norm, "resolves to the host's root");
    if (stat(e->src, &st) < 0)
        return rf_error(L, errno, norm, NULL);
    e->kind = RF_BIND;   /* or RF_LINK, decided in link_or_bind */
    e->rw = (unsigned char)rw;
    e->isdir = S_ISDIR(st.st_mode);
    return 1;
}

static int cmp_ent(const void *a, const void *b)
{
    return strcmp(((const struct hcp_rootfs_ent *)a)->dest, ((const struct hcp_rootfs_ent *)b)->dest);
}

/* A bind whose view path shows the same host path (no symlink on the way). */
static int identity(const struct hcp_rootfs_ent *e)
{
    return e->kind == RF_BIND && strcmp(e->dest, e->src) == 0;
}

/* A ro entry that is a symlink (dest != src although its parent is shown
 * as on the host): if its target is visible, unchanged, through another
 * entry, the view gets the link (pointing at the real path); else the
 * target itself is bound at the link's place. An entry that a read-only
 * parent already shows as it is gets no mount of its own. */
static void link_or_bind(struct hcp_rootfs *rf, int i, int *drop)
{
    struct hcp_rootfs_ent *e = &rf->e[i];
    *drop = 0;
    if (e->kind != RF_BIND)
        return;
    for (int j = 0; j < rf->n; j++) {
        const struct hcp_rootfs_ent *p = &rf->e[j];
        if (j == i || !identity(p))
            continue;
        if (!e->rw && !p->rw && identity(e) && under(p->dest, e->dest) && strcmp(p->dest, e->dest) != 0)
            *drop = 1;   /* already there, read-only, through p */
        else if (!e->rw && !identity(e) && under(p->dest, e->src))
            e->kind = RF_LINK;
    }
}

int hcp_rootfs_prepare(lua_State *L, int t, int pin, int with_proc, struct hcp_rootfs *rf)
{
    static const char *const lists[] = { "ro", "rw" };
    lua_Integer n = 3;
    for (int k = 0; k < 2; k++) {
        lua_getfield(L, t, lists[k]);
        n += lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
        lua_pop(L, 1);
    }
    if (n > RF_MAX)
        return lua_pushfstring(L, "spawn: isolation: rootfs: more than %d paths", RF_MAX), E2BIG;
    rf->e = lua_newuserdatauv(L, sizeof *rf->e * (size_t)n, 0);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    rf->n = 0;
    for (int k = 0; k < 2; k++) {
        lua_getfield(L, t, lists[k]);
        lua_Integer len = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
        for (lua_Integer i = 1; i <= len; i++) {
            lua_rawgeti(L, -1, i);
            const char *p = lua_tostring(L, -1);   /* pinned by opts */
            lua_pop(L, 1);
            int r = plan_one(L, pin, p, k, &rf->e[rf->n]);
            if (r > 1)
                return r;
            rf->n += r;
        }
        lua_pop(L, 1);
    }
    static const struct { const char *dest; int kind; } own[] = {
        { "/dev", RF_DEV }, { "/tmp", RF_TMP }, { "/proc", RF_PROC },
    };
    for (int k = 0; k < (with_proc ? 3 : 2); k++)
        rf->e[rf->n++] = (struct hcp_rootfs_ent){ own[k].dest, NULL, (unsigned char)own[k].kind, 1, 1 };
    qsort(rf->e, (size_t)rf->n, sizeof *rf->e, cmp_ent);
    int out = 0;
    for (int i = 0; i < rf->n; i++) {
        if (out > 0 && strcmp(rf->e[out - 1].dest, rf->e[i].dest) == 0) {
            if (rf->e[out - 1].rw != rf->e[i].rw)
                return rf_error(L, EINVAL, rf->e[i].dest, "both read-only and read-write");
            continue;   /* asked for twice */
        }
        rf->e[out++] = rf->e[i];
    }
    rf->n = out;
    out = 0;
    for (int i = 0; i < rf->n; i++) {
        int drop;
        link_or_bind(rf, i, &drop);
        if (!drop)
            rf->e[out++] = rf->e[i];
    }
    rf->n = out;
    lua_getfield(L, t, "legacy");
    rf->legacy = lua_toboolean(L, -1);
    lua_getfield(L, t, "tmp_mb");
    lua_Integer mb = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : DEFAULT_TMP_MB;
    lua_pop(L, 2);
    join(rf->tmp_opts, "mode=1777,size=", "", (long long)mb << 20);
    return 0;
}

const char *hcp_rootfs_where(const struct hcp_rootfs *rf, int where)
{
    if (where >= 0 && where < rf->n)
        return rf->e[where].dest;
    return where == RF_AT_FINISH ? "detaching the host's root" : "setting up";
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
    join(path, proc, "mountinfo", -1);
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
    join(s, proc, "fd/", src_fd);
    join(t, proc, "fd/", tgt_fd);
    if (mount(s, t, NULL, MS_BIND | MS_REC, NULL) < 0)
        return -1;
    return set ? remount_under(proc, dest, set) : 0;
}

/* ---- building the view (child) ------------------------------------------ */

/* The tmpfs mounts we made (our root, /dev, the private /tmp and /dev/shm):
 * the only places a mount point may be created (/dev is read-only by then:
 * only its /dev/shm takes any). */
static dev_t own_dev[4];
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
    if (n_own < 4 && stat(path, &st) == 0)
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
        join(host, "dev/", devices[i], -1);
        join(view, "/dev/", devices[i], -1);
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
        mount("tmpfs", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, rf->tmp_opts) < 0)
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
        join(rel, "proc/", proc_ro[i], -1);
        join(abs, "/proc/", proc_ro[i], -1);
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
    default: return place_proc(root, rf);
    }
}

int hcp_rootfs_build(const struct hcp_rootfs *rf, int *where)
{
    *where = RF_AT_SETUP;
    /* Nothing we mount may propagate to the host, nor the host's to us. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return -1;
    if (mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=1048576") < 0)
        return -1;
    if (mkdir("/tmp" OLD, 0700) < 0 || syscall(SYS_pivot_root, "/tmp", "/tmp" OLD) < 0 || chdir("/") < 0)
        return -1;
    int old = open(OLD, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int root = old < 0 ? -1 : open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return fail_close(old, -1);
    n_own = 0;
    add_own("/");
    for (int i = 0; i < rf->n; i++) {
        *where = i;
        if (place(root, old, rf, &rf->e[i]) < 0)
            return fail_close(old, root);
    }
    *where = RF_AT_FINISH;
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

/* ---- staging for a process that builds its own view --------------------- */

int hcp_stage_check(lua_State *L, int t, struct hcp_stage *st)
{
    if (!lua_istable(L, t))
        luaL_error(L, "spawn: isolation: stage must be an array of paths");
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    if (n > HCP_STAGE_MAX)
        luaL_error(L, "spawn: isolation: stage holds at most %d paths", HCP_STAGE_MAX);
    st->n = 0;
    for (lua_Integer i = 1; i <= n; i++) {
        const char *path = NULL, *beneath = NULL;
        size_t len = 0, blen = 0;   /* (clang cannot see that luaL_error does not return) */
        int ty = lua_rawgeti(L, t, i);
        if (ty == LUA_TTABLE) {
            lua_getfield(L, -1, "path");
            lua_getfield(L, -2, "beneath");
            path = lua_type(L, -2) == LUA_TSTRING ? lua_tolstring(L, -2, &len) : NULL;
            beneath = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &blen) : NULL;
            lua_pop(L, 2);   /* both pinned by the entry, pinned by opts */
        } else if (ty == LUA_TSTRING) {
            path = lua_tolstring(L, -1, &len);
        }
        if (!path || path[0] != '/' || (beneath && beneath[0] != '/') ||
            (ty == LUA_TTABLE && !beneath))
            luaL_error(L, "spawn: isolation: stage[%I] must be an absolute path or "
                       "{ path = <absolute>, beneath = <absolute> }", i);
        lua_pop(L, 1);
        if (strlen(path) != len || (beneath && strlen(beneath) != blen)) {
            lua_pushfstring(L, "spawn: isolation: stage[%I] contains a NUL byte", i);
            return -1;
        }
        st->e[st->n].path = path;
        st->e[st->n].beneath = beneath;
        st->e[st->n].rel = NULL;
        if (beneath) {   /* the part below `beneath`, lexically; the kernel checks the rest */
            size_t bl = strlen(beneath);
            while (bl > 1 && beneath[bl - 1] == '/')
                bl--;
            if (strncmp(path, beneath, bl) != 0 || (bl > 1 && path[bl] != '/'))
                luaL_error(L, "spawn: isolation: stage[%I]: %s is not beneath %s", i, path, beneath);
            const char *rel = path + (bl > 1 ? bl : 0);
            while (*rel == '/')
                rel++;
            st->e[st->n].rel = *rel ? rel : ".";
        }
        st->n++;
    }
    return 0;
}

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
        join(name, "", "", (long long)i + 1);
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
