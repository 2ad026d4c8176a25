/* hcp_lua.c — the hcp-lua interpreter, and the hcp / hcpx commands.
 *
 * Modelled on Lua 5.4's lua.c: same options, same `arg` table, everything
 * under lua_pcall with a traceback handler, Ctrl-C turned into a Lua error by
 * a hook. Additions: hcp.core is linked in and preloaded, the install tree's
 * Lua directories are searched first, and argv[0] "hcp"/"hcpx" runs the CLI.
 * The interactive REPL is in repl.c. */
#include "hcp_core.h"
#include "hcp_lua.h"
#include "isolation.h"
#include "spawn.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <lualib.h>

#define LUA_DIRVER LUA_VERSION_MAJOR "." LUA_VERSION_MINOR

const char *hcp_lua_progname = "hcp-lua";  /* NULL in the REPL: no prefix */
static lua_State *globalL;                /* for the SIGINT handler */

/* ---- messages and protected calls ------------------------------------ */

static void l_message(const char *pname, const char *msg)
{
    if (pname)
        fprintf(stderr, "%s: ", pname);
    fprintf(stderr, "%s\n", msg);
    fflush(stderr);
}

/* Prints the error message on the stack (if any) and pops it. */
int hcp_lua_report(lua_State *L, int status)
{
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        l_message(hcp_lua_progname, msg ? msg : "(error object is not a string)");
        lua_pop(L, 1);
    }
    return status;
}

static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);

    if (msg == NULL) {  /* a non-string error object */
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            return 1;  /* its own description is the message */
        msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1);
    return 1;
}

/* Ctrl-C while Lua runs: the handler only sets a hook (async-signal-safe),
 * and the hook raises the error from inside the interpreter. */
static void lstop(lua_State *L, lua_Debug *ar)
{
    (void)ar;
    lua_sethook(L, NULL, 0, 0);
    luaL_error(L, "interrupted!");
}

static void laction(int sig)
{
    int saved = errno;
    int mask = LUA_MASKCALL | LUA_MASKRET | LUA_MASKLINE | LUA_MASKCOUNT;

    (void)sig;
    lua_sethook(globalL, lstop, mask, 1);
    errno = saved;
}

void hcp_lua_set_sigint(void (*handler)(int), int flags)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = flags;
    sigemptyset(&sa.sa_mask);
    /* Cannot fail for SIGINT with a valid handler; nothing to do if it did. */
    (void)sigaction(SIGINT, &sa, NULL);
}

int hcp_lua_docall(lua_State *L, int narg, int nres)
{
    int status;
    int base = lua_gettop(L) - narg;

    lua_pushcfunction(L, msghandler);
    lua_insert(L, base);
    globalL = L;
    /* SA_RESETHAND: a second Ctrl-C kills us even if Lua is stuck in C. */
    hcp_lua_set_sigint(laction, SA_RESETHAND);
    status = lua_pcall(L, narg, nres, base);
    hcp_lua_set_sigint(SIG_DFL, 0);
    lua_remove(L, base);
    return status;
}

static int dochunk(lua_State *L, int status)
{
    if (status == LUA_OK)
        status = hcp_lua_docall(L, 0, 0);
    return hcp_lua_report(L, status);
}

static int dofile(lua_State *L, const char *name)
{
    return dochunk(L, luaL_loadfile(L, name));
}

static int dostring(lua_State *L, const char *s, const char *name)
{
    return dochunk(L, luaL_loadbuffer(L, s, strlen(s), name));
}

static void print_version(void)
{
    printf("hcp-lua %s (Lua %s)\n", HCP_CORE_VERSION, LUA_DIRVER);
    fflush(stdout);
}

static void print_usage(const char *badoption)
{
    if (badoption[1] == 'e' || badoption[1] == 'l')
        fprintf(stderr, "hcp-lua: '%s' needs argument\n", badoption);
    else
        fprintf(stderr, "hcp-lua: unrecognized option '%s'\n", badoption);
    fprintf(stderr,
            "usage: hcp-lua [options] [script [args]]\n"
            "Available options are:\n"
            "  -e stat   execute string 'stat'\n"
            "  -i        enter interactive mode after executing 'script'\n"
            "  -l mod    require library 'mod' into global 'mod'\n"
            "  -l g=mod  require library 'mod' into global 'g'\n"
            "  -v        show version information\n"
            "  -E        ignore environment variables\n"
            "  -W        turn warnings on\n"
            "  --        stop handling options\n"
            "  -         stop handling options and execute stdin\n");
    fflush(stderr);
}

/* ---- module search paths ---------------------------------------------- */

static int l_preload_core(lua_State *L)
{
    return luaopen_hcp_core(L);
}

/* Prepends add to package[field]. */
static void prepend_path(lua_State *L, const char *field, const char *add)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, field);
    lua_pushfstring(L, "%s%s", add, lua_tostring(L, -1) ? lua_tostring(L, -1) : "");
    lua_setfield(L, -3, field);
    lua_pop(L, 2);
}

/* hcp.core comes from this binary, not from a core.so that might be another
 * version; the Lua modules come from the tree this binary sits in, whether
 * the build directory or an install prefix. */
static void setup_paths(lua_State *L)
{
    char exe[PATH_MAX], *slash;
    ssize_t n;
    size_t need;
    char *share, *lib, *nshare, *nlib;

    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, l_preload_core);
    lua_setfield(L, -2, "hcp.core");
    lua_pop(L, 1);

    n = readlink("/proc/self/exe", exe, sizeof exe);
    /* Without /proc (or with an absurd path) there is no install tree to
     * find; the default paths still apply. */
    if (n <= 0 || (size_t)n >= sizeof exe)
        return;
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    if (!slash)
        return;
    *slash = '\0';  /* exe is now bindir */

    /* Raw and normalised forms of both directories, collected with L. */
    need = strlen(exe) + sizeof "/../share/lua/" LUA_DIRVER;
    share = lua_newuserdatauv(L, 4 * need, 0);
    lib = share + need;
    nshare = lib + need;
    nlib = nshare + need;
    snprintf(share, need, "%s/../share/lua/" LUA_DIRVER, exe);
    snprintf(lib, need, "%s/../lib/lua/" LUA_DIRVER, exe);
    /* /proc/self/exe has no symlinks left, so a lexical ".." is exact. */
    if (hcp_path_normalize(share, nshare, need) >= 0 &&
        hcp_path_normalize(lib, nlib, need) >= 0) {
        lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;", nshare, nshare);
        prepend_path(L, "path", lua_tostring(L, -1));
        lua_pushfstring(L, "%s/?.so;", nlib);
        prepend_path(L, "cpath", lua_tostring(L, -1));
        lua_pop(L, 2);
    }
    lua_pop(L, 1);
}

/* hcp and hcpx run in any directory, often an untrusted checkout: a module
 * missing from the install must not be picked up from the cwd instead, so
 * every relative template goes. */
static void drop_cwd_templates(lua_State *L, const char *field)
{
    luaL_Buffer b;
    const char *p, *end;
    int first = 1;

    lua_getglobal(L, "package");
    lua_getfield(L, -1, field);
    p = lua_tostring(L, -1);
    if (p == NULL) {
        lua_pop(L, 2);
        return;
    }
    luaL_buffinit(L, &b);
    for (; *p; p = *end ? end + 1 : end) {
        end = strchr(p, ';');
        if (!end)
            end = p + strlen(p);
        if (p[0] != '/')
            continue;  /* empty, or relative to the cwd: "./?.lua", "?.lua" */
        if (!first)
            luaL_addchar(&b, ';');
        luaL_addlstring(&b, p, (size_t)(end - p));
        first = 0;
    }
    luaL_pushresult(&b);
    lua_setfield(L, -3, field);
    lua_pop(L, 2);
}

static void createargtable(lua_State *L, char **argv, int argc, int script)
{
    int i;

    if (script == argc)
        script = 0;  /* no script name: arg[0] is the interpreter */
    lua_createtable(L, argc - (script + 1), script + 1);
    for (i = 0; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i - script);
    }
    lua_setglobal(L, "arg");
}

static int handle_luainit(lua_State *L)
{
    const char *name = "=LUA_INIT_" LUA_VERSION_MAJOR "_" LUA_VERSION_MINOR;
    const char *init = getenv(name + 1);

    if (init == NULL) {
        name = "=LUA_INIT";
        init = getenv(name + 1);
    }
    if (init == NULL)
        return LUA_OK;
    if (init[0] == '@')
        return dofile(L, init + 1);
    return dostring(L, init, name);
}

/* ---- hcp-lua ----------------------------------------------------------- */

#define has_error 1
#define has_i 2
#define has_v 4
#define has_e 8
#define has_E 16

/* Scans the options; *first is the script's index, 0 without a script
 * (and the faulty option's index on error). */
static int collectargs(char **argv, int *first)
{
    int args = 0, i;

    for (i = 1; argv[i] != NULL; i++) {
        *first = i;
        if (argv[i][0] != '-')
            return args;  /* the script */
        switch (argv[i][1]) {
        case '-':  /* "--" */
            if (argv[i][2] != '\0')
                return has_error;
            *first = argv[i + 1] ? i + 1 : 0;
            return args;
        case '\0':  /* "-": the script is stdin */
            return args;
        case 'E':
            if (argv[i][2] != '\0')
                return has_error;
            args |= has_E;
            break;
        case 'W':
            if (argv[i][2] != '\0')
                return has_error;
            break;
        case 'i':
            args |= has_i;  /* -i implies -v, as in lua.c */
            /* fall through */
        case 'v':
            if (argv[i][2] != '\0')
                return has_error;
            args |= has_v;
            break;
        case 'e':
            args |= has_e;
            /* fall through */
        case 'l':  /* both need an argument, attached or next */
            if (argv[i][2] == '\0') {
                i++;
                if (argv[i] == NULL || argv[i][0] == '-')
                    return has_error;
            }
            break;
        default:
            return has_error;
        }
    }
    *first = 0;
    return args;
}

/* -l mod: mod = require("mod"); -l g=mod: g = require("mod"). As in lua.c, a
 * "-suffix" is dropped from the global name ("-l a-b" sets global a). */
static int dolibrary(lua_State *L, const char *spec)
{
    const char *eq = strchr(spec, '=');
    const char *modname = eq ? eq + 1 : spec;
    size_t glen = eq ? (size_t)(eq - spec) : strcspn(spec, "-");
    int status;

    lua_getglobal(L, "require");
    lua_pushstring(L, modname);
    status = hcp_lua_docall(L, 1, 1);
    if (status == LUA_OK) {
        lua_pushlstring(L, spec, glen);
        lua_insert(L, -2);
        lua_setglobal(L, lua_tostring(L, -2));
        lua_pop(L, 1);
    }
    return hcp_lua_report(L, status);
}

/* Runs -e, -l and -W in order; 0 when one failed. */
static int runargs(lua_State *L, char **argv, int n)
{
    int i;

    for (i = 1; i < n; i++) {
        int opt = argv[i][1];

        switch (opt) {
        case 'e':
        case 'l': {
            const char *extra = argv[i] + 2;
            int status;

            if (*extra == '\0')
                extra = argv[++i];
            status = opt == 'e' ? dostring(L, extra, "=(command line)")
                                : dolibrary(L, extra);
            if (status != LUA_OK)
                return 0;
            break;
        }
        case 'W':
            lua_warning(L, "@on", 0);
            break;
        default:
            break;
        }
    }
    return 1;
}

static int pushargs(lua_State *L)
{
    int i, n;

    if (lua_getglobal(L, "arg") != LUA_TTABLE)
        luaL_error(L, "'arg' is not a table");
    n = (int)luaL_len(L, -1);
    luaL_checkstack(L, n + 3, "too many arguments to script");
    for (i = 1; i <= n; i++)
        lua_rawgeti(L, -i, i);
    lua_remove(L, -i);
    return n;
}

static int handle_script(lua_State *L, char **argv)
{
    const char *fname = argv[0];
    int status;

    /* "-" is stdin, unless it came after "--". */
    if (strcmp(fname, "-") == 0 && strcmp(argv[-1], "--") != 0)
        fname = NULL;
    status = luaL_loadfile(L, fname);
    if (status == LUA_OK) {
        int n = pushargs(L);
        status = hcp_lua_docall(L, n, LUA_MULTRET);
    }
    return hcp_lua_report(L, status);
}

static int pmain(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = lua_touserdata(L, 2);
    int script = 0;
    int args = collectargs(argv, &script);
    int optlim = script > 0 ? script : argc;

    luaL_checkversion(L);
    if (args == has_error) {
        print_usage(argv[script]);
        return 0;
    }
    if (args & has_v)
        print_version();
    if (args & has_E) {  /* the package library then ignores LUA_PATH etc. */
        lua_pushboolean(L, 1);
        lua_setfield(L, LUA_REGISTRYINDEX, "LUA_NOENV");
    }
    luaL_openlibs(L);
    setup_paths(L);
    createargtable(L, argv, argc, script > 0 ? script : argc);
    lua_gc(L, LUA_GCRESTART);
    lua_gc(L, LUA_GCGEN, 0, 0);
    if (!(args & has_E) && handle_luainit(L) != LUA_OK)
        return 0;
    if (!runargs(L, argv, optlim))
        return 0;
    if (script > 0 && handle_script(L, argv + script) != LUA_OK)
        return 0;
    if (args & has_i) {
        hcp_lua_repl(L);
    } else if (script == 0 && !(args & (has_e | has_v))) {
        if (isatty(STDIN_FILENO)) {
            print_version();
            hcp_lua_repl(L);
        } else if (dofile(L, NULL) != LUA_OK) {
            return 0;
        }
    }
    lua_pushboolean(L, 1);
    return 1;
}

/* ---- hcp / hcpx -------------------------------------------------------- */

/* Whether the process may end without lua_close: the command says it
 * closed everything it opened (cli.closed_all, after `hcp run`'s runtime
 * closed: its private directory is gone, its calls reaped), and no child
 * of ours is left, not even one to reap. What lua_close would still do is
 * free memory and close descriptors, which the exit does; exit() flushes
 * the stdio streams Lua's io library writes through. That saves the
 * collection of the whole state, ~0.4 ms of every `hcp run`. */
static int skip_close;
/* The state, reachable to the end: a leak checker then sees what the exit
 * frees as still reachable, not lost. */
static lua_State *the_state;

static int may_skip_close(lua_State *L, int cli)
{
    siginfo_t si;
    lua_getfield(L, cli, "closed_all");
    int closed = lua_toboolean(L, -1);
    lua_pop(L, 1);
    memset(&si, 0, sizeof si);
    if (closed) {
        hcp_early_cancel();   /* an early child no call took */
        hcp_reap_late(1);     /* an hcp-init still exiting is no child to leave behind */
    }
    return closed && waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 && errno == ECHILD;
}

/* exit code = require("hcp.cli").main(name, {args...}) */
static int pcli(lua_State *L)
{
    int argc = (int)lua_tointeger(L, 1);
    char **argv = lua_touserdata(L, 2);
    const char *name = hcp_lua_progname;
    int i, status;

    luaL_checkversion(L);
    luaL_openlibs(L);
    setup_paths(L);
    drop_cwd_templates(L, "path");
    drop_cwd_templates(L, "cpath");
    hcp_luac_install(L);   /* the modules of a command, compiled once */
    /* a call's network namespace, and its child with the namespaces and
     * the system part of its view, made on the other CPU while the modules
     * load (root only; see netns_pool.c, early.c) */
    if (strcmp(name, "hcpx") == 0 || (argc > 1 && strcmp(argv[1], "run") == 0)) {
        if (!hcp_early_start(L))
            hcp_netns_prefill_early();
    }
    createargtable(L, argv, argc, argc);
    lua_settop(L, 0);

    lua_getglobal(L, "require");
    lua_pushliteral(L, "hcp.cli");
    if (hcp_lua_report(L, hcp_lua_docall(L, 1, 1)) != LUA_OK) {
        lua_pushinteger(L, 1);
        return 1;
    }
    if (lua_getfield(L, -1, "main") != LUA_TFUNCTION) {
        l_message(name, "module 'hcp.cli' has no function 'main'");
        lua_pushinteger(L, 1);
        return 1;
    }
    /* The collector was stopped while the state was set up (main), as
     * lua.c does; the command itself runs with it, as lua.c's script does:
     * `hcp call` and `hcp mcp` serve requests for hours. Incremental:
     * entering generational mode is a full collection. */
    lua_gc(L, LUA_GCRESTART);
    lua_pushstring(L, name);
    lua_createtable(L, argc > 1 ? argc - 1 : 0, 0);
    for (i = 1; i < argc; i++) {
        lua_pushstring(L, argv[i]);
        lua_rawseti(L, -2, i);
    }
    status = hcp_lua_report(L, hcp_lua_docall(L, 2, 1));
    if (status == LUA_OK)
        skip_close = may_skip_close(L, lua_absindex(L, -2));
    if (status != LUA_OK) {
        lua_pushinteger(L, 1);
    } else if (lua_isnoneornil(L, -1) || lua_isboolean(L, -1)) {
        lua_pushinteger(L, lua_isnil(L, -1) || lua_toboolean(L, -1) ? 0 : 1);
    } else if (lua_isinteger(L, -1)) {
        lua_pushinteger(L, lua_tointeger(L, -1));
    } else {
        lua_pushfstring(L, "main returned a %s, not an exit code", luaL_typename(L, -1));
        l_message(name, lua_tostring(L, -1));
        lua_pushinteger(L, 1);
    }
    return 1;
}

int main(int argc, char **argv)
{
    const char *base = argv[0] ? strrchr(argv[0], '/') : NULL;
    int cli, status, code;
    lua_State *L;

    hcp_heap_prepare();   /* first: nothing may have grown the heap yet */
    base = base ? base + 1 : (argv[0] ? argv[0] : "hcp-lua");
    cli = strcmp(base, "hcp") == 0 || strcmp(base, "hcpx") == 0;
    if (argv[0] == NULL) {  /* execve with an empty argv: lua.c tolerates it */
        static char *noargs[] = {"hcp-lua", NULL};
        argv = noargs;
        argc = 1;
    }
    hcp_lua_progname = cli ? (strcmp(base, "hcp") == 0 ? "hcp" : "hcpx") : "hcp-lua";

    L = luaL_newstate();
    if (L == NULL) {
        l_message(hcp_lua_progname, "cannot create state: not enough memory");
        return EXIT_FAILURE;
    }
    lua_gc(L, LUA_GCSTOP);  /* as lua.c: no collection while setting up */
    lua_pushcfunction(L, cli ? pcli : pmain);
    lua_pushinteger(L, argc);
    lua_pushlightuserdata(L, argv);
    status = lua_pcall(L, 2, 1, 0);
    if (cli)
        code = status == LUA_OK ? (int)lua_tointeger(L, -1) : EXIT_FAILURE;
    else
        code = status == LUA_OK && lua_toboolean(L, -1) ? EXIT_SUCCESS : EXIT_FAILURE;
    hcp_lua_report(L, status);
    /* Closing runs __gc/__close, which kill and reap any child still alive. */
    the_state = L;
    if (!skip_close) {
        lua_close(L);
        the_state = NULL;
    }
    return code;
}
