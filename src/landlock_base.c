/* landlock_base.c — the Landlock rules every call shares (issue 12): the
 * system paths a child may read, the devices it may write. A call's
 * ruleset is still its own, made for it, but these rules go in from
 * descriptors opened once (core.landlock_base) instead of five system calls
 * per path per call (statfs, open, fstat, add_rule, close: ~200 a call).
 * The descriptors name what the paths named when they were opened; the
 * directories holding the paths (and, for a link, its target) are stat'ed
 * at every call, and a change of any reopens them all — so a file of /etc
 * replaced by a rename gets its rule on the new file, as it would have if
 * the rule had been made for the call. Paths on procfs are refused here:
 * their rules are the child's own to make (isolation.h, proc_rules). */
#include "isolation.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/landlock.h>
#include <linux/magic.h>

#include "compat.h"

#define LLB_MT "hcp.landlock_base"
#define MAX_STAMPS 64

struct llb_ent { const char *path; int fd, which, isdir; };
struct llb_stamp { const char *path; dev_t dev; ino_t ino; struct timespec mtim, ctim; };

typedef struct {
    int n, nstamps, builds;
    struct llb_ent *e;            /* a userdata, pinned by the uservalue with the paths */
    struct llb_stamp st[MAX_STAMPS];
} llb_t;

static int take(struct llb_stamp *s)
{
    struct stat st;
    if (stat(s->path, &st) < 0)
        return -1;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->mtim = st.st_mtim;
    s->ctim = st.st_ctim;
    return 0;
}

static int same(const struct llb_stamp *a, const struct llb_stamp *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->mtim.tv_sec == b->mtim.tv_sec &&
           a->mtim.tv_nsec == b->mtim.tv_nsec && a->ctim.tv_sec == b->ctim.tv_sec &&
           a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* The directory holding `path`, stamped once (pinned in the table at pin). */
static int stamp_parent(lua_State *L, int pin, llb_t *b, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash == path ? 1 : (size_t)(slash - path);
    for (int i = 0; i < b->nstamps; i++)
        if (strlen(b->st[i].path) == len && strncmp(b->st[i].path, path, len) == 0)
            return 0;
    if (b->nstamps == MAX_STAMPS)
        return -1;
    lua_pushlstring(L, path, len);
    b->st[b->nstamps].path = lua_tostring(L, -1);
    lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);
    return take(&b->st[b->nstamps++]) < 0 ? -1 : 0;
}

static void close_all(llb_t *b)
{
    for (int i = 0; i < b->n; i++)
        if (b->e[i].fd >= 0) {
            close(b->e[i].fd);
            b->e[i].fd = -1;
        }
}

/* (Re)opens every path and stamps what holds it. 0, or -1 with a message. */
static int open_all(lua_State *L, int pin, llb_t *b)
{
    b->nstamps = 0;
    for (int i = 0; i < b->n; i++) {
        struct llb_ent *e = &b->e[i];
        struct stat st;
        char *real = NULL;
        /* the path itself first (O_NOFOLLOW: a link is opened as the link),
         * so one fstat tells a link from what the rule is for */
        e->fd = open(e->path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        int got = e->fd >= 0 && fstat(e->fd, &st) == 0, link = got && S_ISLNK(st.st_mode);
        if (link) {   /* the rule is on what it leads to */
            close(e->fd);
            e->fd = open(e->path, O_PATH | O_CLOEXEC);
            got = e->fd >= 0 && fstat(e->fd, &st) == 0;
        }
        if (e->fd < 0 && errno != ENOENT && errno != ENOTDIR)
            return lua_pushfstring(L, "landlock base: %s: %s", e->path, strerror(errno)), -1;
        e->isdir = got && S_ISDIR(st.st_mode);
        int r = stamp_parent(L, pin, b, e->path);
        if (r == 0 && link && (real = realpath(e->path, NULL)))
            r = stamp_parent(L, pin, b, real);
        free(real);
        if (r < 0)
            return lua_pushfstring(L, "landlock base: more directories than it can watch (%d)", MAX_STAMPS), -1;
    }
    b->builds++;
    return 0;
}

static int add_list(lua_State *L, int opts, int pin, const char *name, int which, llb_t *b)
{
    lua_getfield(L, opts, name);
    lua_Integer n = lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
    for (lua_Integer i = 1; i <= n; i++) {
        lua_rawgeti(L, -1, i);
        size_t len;
        const char *p = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
        if (!p || p[0] != '/' || strlen(p) != len)
            return luaL_error(L, "landlock base: %s[%d] must be an absolute path", name, (int)i);
        lua_rawseti(L, pin, (lua_Integer)lua_rawlen(L, pin) + 1);   /* pins p */
        b->e[b->n++] = (struct llb_ent){ p, -1, which, 0 };
    }
    lua_pop(L, 1);
    return 0;
}

/* core.landlock_base({ read = {paths}, write = {paths} }) -> base | nil, msg */
static int l_landlock_base(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_Integer n = 0;
    for (int k = 0; k < 2; k++) {
        lua_getfield(L, 1, k ? "write" : "read");
        n += lua_istable(L, -1) ? (lua_Integer)lua_rawlen(L, -1) : 0;
        lua_pop(L, 1);
    }
    luaL_argcheck(L, n <= 4096, 1, "too many paths");
    llb_t *b = lua_newuserdatauv(L, sizeof *b, 1);
    memset(b, 0, sizeof *b);
    luaL_setmetatable(L, LLB_MT);
    int ud = lua_gettop(L);
    lua_newtable(L);
    int pin = ud + 1;
    b->e = lua_newuserdatauv(L, sizeof *b->e * (size_t)(n ? n : 1), 0);
    lua_rawseti(L, pin, 1);
    add_list(L, 1, pin, "read", LL_READ, b);
    add_list(L, 1, pin, "write", LL_WRITE, b);
    lua_pushvalue(L, pin);
    lua_setiuservalue(L, ud, 1);
    if (open_all(L, pin, b) < 0) {
        close_all(b);
        return luaL_pushfail(L), lua_insert(L, -2), 2;
    }
    /* asked of what was opened (no second walk of each path) */
    for (int i = 0; i < b->n; i++) {
        struct statfs sf;
        if (b->e[i].fd >= 0 && fstatfs(b->e[i].fd, &sf) == 0 && sf.f_type == PROC_SUPER_MAGIC) {
            const char *p = b->e[i].path;
            close_all(b);
            return luaL_error(L, "landlock base: %s is on procfs: its rule is each child's own", p);
        }
    }
    lua_settop(L, ud);
    return 1;
}

int hcp_landlock_base_add(lua_State *L, int idx, int ruleset, int abi)
{
    llb_t *b = luaL_checkudata(L, idx, LLB_MT);
    int stale = 0;
    for (int i = 0; i < b->nstamps && !stale; i++) {
        struct llb_stamp now = b->st[i];
        stale = take(&now) < 0 || !same(&now, &b->st[i]);
    }
    if (stale) {
        close_all(b);
        lua_getiuservalue(L, idx, 1);
        int r = open_all(L, lua_gettop(L), b);
        if (r < 0) {
            int err = errno;
            lua_pop(L, 2);
            return errno = err ? err : EIO, -1;
        }
        lua_pop(L, 1);
    }
    for (int i = 0; i < b->n; i++) {
        const struct llb_ent *e = &b->e[i];
        if (e->fd < 0)
            continue;   /* not on this host (/lib32 and such), as a per-call rule skips it */
        struct landlock_path_beneath_attr pb;
        pb.allowed_access = hcp_landlock_rights(abi, e->which);
        if (!e->isdir)
            pb.allowed_access &= hcp_landlock_rights(abi, LL_FILE);
        pb.parent_fd = e->fd;
        if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &pb, 0U) < 0)
            return -1;
    }
    return 0;
}

/* base:builds() -> how many times its paths were opened (1, more after changes) */
static int b_builds(lua_State *L)
{
    lua_pushinteger(L, ((llb_t *)luaL_checkudata(L, 1, LLB_MT))->builds);
    return 1;
}

static int b_gc(lua_State *L)
{
    close_all(luaL_checkudata(L, 1, LLB_MT));
    return 0;
}

void hcp_register_landlock_base(lua_State *L)
{
    static const luaL_Reg meta[] = { { "__gc", b_gc }, { "__close", b_gc }, { NULL, NULL } };
    static const luaL_Reg methods[] = { { "builds", b_builds }, { NULL, NULL } };
    luaL_newmetatable(L, LLB_MT);
    luaL_setfuncs(L, meta, 0);
    luaL_newlib(L, methods);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
    lua_pushcfunction(L, l_landlock_base);
    lua_setfield(L, -2, "landlock_base");
}
