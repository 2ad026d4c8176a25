/* calldirs.c — a call's own directories made ahead of it and removed
 * behind it, off the call's path: core.mkdtemp_ahead, core.rmtree_later,
 * core.calldirs_settle.
 *
 * Why: a directory costs what the filesystem makes it cost. On this host's
 * /tmp (ext4 without a journal, mounted with online discard) one rmdir took
 * 110-130 µs in a C loop and ~460 µs on average inside a call, and a mkdir
 * 20-150 µs (it scans past recently deleted inodes): together more than
 * the rest of a minimal call's own work. A worker thread now makes a
 * call's next directories while the calls run, and removes their old ones
 * after them, the way core.rmtree does (by descriptor, never through a
 * link); the caller goes on. Both on one thread, so the two never contend
 * for the parent directory's lock.
 *
 * What is made ahead: mkdtemp names under a base (the runtime's private
 * directory, 0700), at most SPARES per prefix, never handed out twice, from
 * the second directory asked for on (a process that makes one call, as
 * hcp run, starts no worker: its directories are made and removed in it,
 * as before). A spare taken is made again once the call's child has
 * started (hcp_calldirs_kick), while the caller waits for the child
 * anyway: waking a thread took ~40 µs here.
 * Handed out only if it is still what was made: a directory (not a link),
 * ours, mode 0700, empty; otherwise it is removed and a directory is made
 * there and then. What is removed behind: only paths no
 * later call can be given (mkdtemp names: a call's jail, a call's own
 * directory), so the worker never races a call that made the same path
 * again. A tree waiting there is the runtime's own and no other call's
 * view holds it. core.calldirs_settle(base) returns once everything handed
 * over is removed and the spares under base with it: the runtime's close
 * settles before it removes its private directory.
 *
 * The thread makes system calls and allocates, nothing else; it has every
 * signal blocked, so signals stay the main thread's; it creates no
 * process, so no child's death signal is tied to it. It is started on
 * first use and joined when the Lua state that loaded this module closes
 * (a finalizer made after package's, so it runs before the module can be
 * unloaded). Calls from one OS thread at a time, as the rest of the core. */
#include "hcp_core.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define KINDS 4    /* (base, prefix) pairs kept: a runtime's "jail-" and "call-", two runtimes */
#define SPARES 2   /* made ahead per kind */

struct job {
    struct job *next;
    char *path;
};

struct kind {
    char *base;             /* NULL: slot free */
    char prefix[16];
    char *spare[SPARES];    /* oldest first */
    int n;
    int asked;              /* times a directory was asked for: made ahead from the second */
    unsigned long used;     /* when last asked for: the slot reused is the oldest */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;   /* work, or quit */
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;   /* nothing under way */
static struct job *head, **tail = &head;
static struct kind kinds[KINDS];
static unsigned long clock_uses;
static int running, busy, quit;
static int kick_due;   /* spares are wanted: the worker is woken after the next spawn */
static pthread_t worker;

/* ---- with mu held ------------------------------------------------------- */

/* Takes over path (malloc'd) for removal. 0, or ENOMEM (path freed). */
static int enqueue(char *path)
{
    struct job *j = malloc(sizeof *j);
    if (!j) {
        free(path);
        return ENOMEM;
    }
    j->path = path;
    j->next = NULL;
    *tail = j;
    tail = &j->next;
    return 0;
}

/* A kind's spares go to the removal queue and its slot is freed. A spare
 * that cannot be queued (no memory) is left in base, which its runtime
 * removes whole. */
static void drop_kind(struct kind *k)
{
    for (int i = 0; i < k->n; i++)
        (void)enqueue(k->spare[i]);
    free(k->base);
    memset(k, 0, sizeof *k);
}

static struct kind *short_kind(void)
{
    for (int i = 0; i < KINDS; i++)
        if (kinds[i].base && kinds[i].asked >= 2 && kinds[i].n < SPARES)
            return &kinds[i];
    return NULL;
}

static struct kind *find_kind(const char *base, const char *prefix)
{
    for (int i = 0; i < KINDS; i++)
        if (kinds[i].base && strcmp(kinds[i].base, base) == 0 && strcmp(kinds[i].prefix, prefix) == 0)
            return &kinds[i];
    return NULL;
}

/* The kind of (base, prefix), made in the free or oldest slot; NULL when
 * out of memory. */
static struct kind *kind_for(const char *base, const char *prefix)
{
    struct kind *k = find_kind(base, prefix);
    if (!k) {
        k = &kinds[0];
        for (int i = 1; i < KINDS && k->base; i++)
            if (!kinds[i].base || kinds[i].used < k->used)
                k = &kinds[i];
        if (k->base)
            drop_kind(k);
        if (!(k->base = strdup(base)))
            return NULL;
        memcpy(k->prefix, prefix, strlen(prefix) + 1);
    }
    k->used = ++clock_uses;
    if (k->asked < 2)
        k->asked++;
    return k;
}

static void *work(void *arg);

/* The worker, started if need be. 0 or an errno. */
static int start(void)
{
    if (running)
        return 0;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int err = pthread_create(&worker, NULL, work, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err == 0)
        running = 1, quit = 0;
    return err;
}

/* ---- the worker --------------------------------------------------------- */

/* One spare for k, made with mu released; kept if k still wants it. A
 * base where none can be made gets no more (the caller's own mkdtemp then
 * reports why). */
static void make_spare(struct kind *k)
{
    char *base = strdup(k->base), prefix[sizeof k->prefix];
    if (!base) {
        drop_kind(k);
        return;
    }
    memcpy(prefix, k->prefix, sizeof prefix);
    pthread_mutex_unlock(&mu);
    char *path = hcp_mkdtemp(base, prefix);
    pthread_mutex_lock(&mu);
    struct kind *now = find_kind(base, prefix);   /* k may have been reused meanwhile */
    if (path && now && now->n < SPARES)
        now->spare[now->n++] = path;
    else if (path)
        (void)enqueue(path);
    else if (now)
        drop_kind(now);
    free(base);
}

static void remove_one(void)
{
    struct job *j = head;
    head = j->next;
    if (!head)
        tail = &head;
    pthread_mutex_unlock(&mu);
    /* what cannot be removed stays, as a call's cleanup always left it */
    const char *what;
    (void)hcp_rmtree(j->path, &what);
    free(j->path);
    free(j);
    pthread_mutex_lock(&mu);
}

static void *work(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&mu);
    for (;;) {
        struct kind *k;
        while (!head && !(k = short_kind()) && !quit)
            pthread_cond_wait(&wake, &mu);
        busy = 1;
        if ((k = short_kind()) && !quit)
            make_spare(k);   /* the next call waits for this one; removals do not */
        else if (head)
            remove_one();
        else
            break;
        busy = 0;
        if (!head)
            pthread_cond_broadcast(&idle);
    }
    busy = running = 0;
    pthread_cond_broadcast(&idle);
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* ---- the Lua functions -------------------------------------------------- */

/* A spare is handed out only as it was made: a directory (not a link),
 * ours, 0700, empty. Its parent is the runtime's 0700 directory, so only
 * the runtime's own uid can have touched it — which, under "minimal"
 * isolation, includes an earlier call's child: one that planted a file in
 * the next call's jail while it waited is caught here. (Such a child can
 * still write into a jail once it is in use, made ahead or not: "minimal"
 * keeps no call from another of the same uid.) */
static int still_fresh(const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    int fresh = fstat(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 07777) == 0700;
    union {
        char b[1024];
        struct dirent64 align;
    } u;
    long n;
    while (fresh && (n = syscall(SYS_getdents64, fd, u.b, sizeof u.b)) != 0) {
        fresh = n > 0;
        for (long at = 0; fresh && at < n;) {
            const struct dirent64 *e = (const struct dirent64 *)(const void *)(u.b + at);
            fresh = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
            at += e->d_reclen;
        }
    }
    close(fd);
    return fresh;
}

/* core.mkdtemp_ahead(parent, prefix) -> path: as core.mkdtemp (a new 0700
 * directory parent/prefixXXXXXX), one made ahead when there is one; the
 * next is made ahead meanwhile. */
static int l_mkdtemp_ahead(lua_State *L)
{
    const char *prefix, *parent = hcp_check_mkdtemp_args(L, &prefix);
    char *path = NULL;
    if (strlen(prefix) < sizeof kinds[0].prefix) {
        pthread_mutex_lock(&mu);
        struct kind *k = kind_for(parent, prefix);
        if (k && k->n > 0) {
            path = k->spare[0];
            memmove(k->spare, k->spare + 1, (size_t)--k->n * sizeof *k->spare);
        }
        /* The worker is woken once the call's child is started
         * (hcp_calldirs_kick), while the caller waits for it anyway: waking
         * a thread took ~40 us here. Now, when no spare is left. */
        if (k && k->asked >= 2 && start() == 0) {
            if (k->n > 0)
                kick_due = 1;
            else
                pthread_cond_signal(&wake);
        }
        if (path && !still_fresh(path)) {
            (void)enqueue(path);   /* as it is, never through a link */
            path = NULL;
        }
        pthread_mutex_unlock(&mu);
    }
    return hcp_push_mkdtemp(L, parent, prefix, path);
}

void hcp_calldirs_kick(void)
{
    if (!kick_due)
        return;
    pthread_mutex_lock(&mu);
    kick_due = 0;
    if (running)
        pthread_cond_signal(&wake);
    pthread_mutex_unlock(&mu);
}

/* core.rmtree_later(path) -> true: path handed to the worker when it runs
 * (a runtime's second call on), else removed now, in the caller. The
 * worker is woken now, though the wake costs the ending call ~40 µs here:
 * woken later (at the next call's start), it removed the tree while that
 * call ran, not in the time between, and the call took longer. */
static int l_rmtree_later(lua_State *L)
{
    const char *path = hcp_check_rmtree_path(L, 1);
    int queued = 0;
    pthread_mutex_lock(&mu);
    if (running && !quit) {
        char *copy = strdup(path);
        if (copy && enqueue(copy) == 0) {
            queued = 1;
            pthread_cond_signal(&wake);
        }
    }
    pthread_mutex_unlock(&mu);
    if (!queued)
        return hcp_push_rmtree(L, path);
    lua_pushboolean(L, 1);
    return 1;
}

/* core.calldirs_settle([base]) -> true, once every path handed over is
 * removed; with base, its spares too, and none is made there until
 * core.mkdtemp_ahead asks again. */
static int l_calldirs_settle(lua_State *L)
{
    const char *base = luaL_optstring(L, 1, NULL);
    pthread_mutex_lock(&mu);
    for (int i = 0; base && i < KINDS; i++)
        if (kinds[i].base && strcmp(kinds[i].base, base) == 0)
            drop_kind(&kinds[i]);
    if (head && start() == 0)
        pthread_cond_signal(&wake);
    while (running && (head || busy))
        pthread_cond_wait(&idle, &mu);
    pthread_mutex_unlock(&mu);
    lua_pushboolean(L, 1);
    return 1;
}

/* The state's close: no more spares, the queue drained, the worker joined.
 * Spares still made are left in their base, which its runtime removes. */
static int stop(lua_State *L)
{
    (void)L;
    pthread_mutex_lock(&mu);
    int was = running;
    pthread_t t = worker;
    quit = 1;
    pthread_cond_signal(&wake);
    pthread_mutex_unlock(&mu);
    if (was)
        pthread_join(t, NULL);
    return 0;
}

void hcp_register_calldirs(lua_State *L)
{
    static const luaL_Reg funcs[] = {
        { "mkdtemp_ahead", l_mkdtemp_ahead }, { "rmtree_later", l_rmtree_later },
        { "calldirs_settle", l_calldirs_settle }, { NULL, NULL },
    };
    luaL_setfuncs(L, funcs, 0);
    /* one sentinel per state, however often the module is required */
    if (lua_getfield(L, LUA_REGISTRYINDEX, "hcp.core.calldirs") == LUA_TNIL) {
        lua_newuserdatauv(L, 1, 0);
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, stop);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, "hcp.core.calldirs");
    }
    lua_pop(L, 1);
}
