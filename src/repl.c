/* repl.c — the interactive REPL of hcp-lua.
 *
 * As lua.c's: a line is tried as an expression first, an unfinished statement
 * continues on the next line, results are printed. Additions: readline with a
 * history file when stdin is a terminal, Ctrl-C at the prompt drops the line,
 * results go to hcp_repl_print when defined, and hcp and rt are preloaded. */
#include "hcp_lua.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include <readline/history.h>
#include <readline/readline.h>

#define PROMPT1 "hcp> "
#define PROMPT2 ">> "
#define HISTORY_MAX 1000

static volatile sig_atomic_t prompt_interrupted;
static char *histfile;      /* NULL: no history file */
static int use_readline;    /* stdin is a terminal */
static char *line_result;
static int line_done;

static void on_prompt_sigint(int sig)
{
    (void)sig;
    prompt_interrupted = 1;
}

static void on_rl_line(char *line)
{
    line_result = line;
    line_done = 1;
    /* Removed here, or readline would print the prompt again. */
    rl_callback_handler_remove();
}

enum { LINE_OK, LINE_EOF, LINE_INTR };

/* Reads one line through readline's callback interface, so Ctrl-C at the
 * prompt can be seen between keys: SIGINT is blocked except inside ppoll. */
static int readline_intr(const char *prompt, char **out)
{
    sigset_t block, orig;
    struct pollfd pfd;
    int result = LINE_OK;

    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &orig);
    prompt_interrupted = 0;
    hcp_lua_set_sigint(on_prompt_sigint, 0);
    line_done = 0;
    line_result = NULL;
    rl_callback_handler_install(prompt, on_rl_line);
    pfd.fd = fileno(rl_instream ? rl_instream : stdin);
    pfd.events = POLLIN;
    while (!line_done) {
        if (prompt_interrupted) {
            /* Drop the half-typed line and start afresh on a new prompt. */
            rl_free_line_state();
            rl_callback_sigcleanup();
            rl_replace_line("", 0);
            rl_callback_handler_remove();
            fputs("\n", rl_outstream ? rl_outstream : stdout);
            result = LINE_INTR;
            break;
        }
        if (ppoll(&pfd, 1, NULL, &orig) < 0) {
            if (errno == EINTR)
                continue;
            rl_callback_handler_remove();  /* unusable terminal: treat as EOF */
            break;
        }
        rl_callback_read_char();
    }
    hcp_lua_set_sigint(SIG_DFL, 0);
    sigprocmask(SIG_SETMASK, &orig, NULL);
    *out = line_result;
    if (result == LINE_OK && line_result == NULL)
        result = LINE_EOF;
    return result;
}

/* Without a terminal (hcp-lua -i < file): plain reads, prompts as lua.c. */
static int readline_plain(const char *prompt, char **out)
{
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;

    fputs(prompt, stdout);
    fflush(stdout);
    n = getline(&line, &cap, stdin);
    if (n < 0) {
        free(line);
        *out = NULL;
        return LINE_EOF;
    }
    if (n > 0 && line[n - 1] == '\n')
        line[n - 1] = '\0';
    *out = line;
    return LINE_OK;
}

/* Pushes the next line (without its newline); returns LINE_*. */
static int pushline(lua_State *L, int firstline)
{
    const char *prompt = firstline ? PROMPT1 : PROMPT2;
    char *line;
    int r = use_readline ? readline_intr(prompt, &line) : readline_plain(prompt, &line);

    if (r != LINE_OK)
        return r;
    lua_pushstring(L, line);  /* a memory error here leaks line: harmless */
    free(line);
    return LINE_OK;
}

static void save_line(const char *line)
{
    if (!use_readline || line[0] == '\0')
        return;
    add_history(line);
    /* Appended at once so a crash or kill loses nothing; failures (read-only
     * home, …) only cost the history. */
    if (histfile)
        (void)append_history(1, histfile);
}

/* The line as an expression first, so "1+1" prints 2. */
static int addreturn(lua_State *L)
{
    const char *line = lua_tostring(L, -1);
    const char *retline = lua_pushfstring(L, "return %s;", line);
    int status = luaL_loadbuffer(L, retline, strlen(retline), "=stdin");

    if (status == LUA_OK) {
        lua_remove(L, -2);  /* the "return" string */
        save_line(line);
    } else {
        lua_pop(L, 2);  /* the error and the "return" string */
    }
    return status;
}

/* A syntax error at <eof> means the statement is not finished yet. */
static int incomplete(lua_State *L, int status)
{
    static const char mark[] = "<eof>";
    const size_t marklen = sizeof mark - 1;

    if (status == LUA_ERRSYNTAX) {
        size_t len;
        const char *msg = lua_tolstring(L, -1, &len);
        if (len >= marklen && strcmp(msg + len - marklen, mark) == 0) {
            lua_pop(L, 1);
            return 1;
        }
    }
    return 0;
}

/* Returns -1 at EOF, -2 when the input was interrupted, else the load status
 * with the chunk (or the error) on the stack. */
static int loadline(lua_State *L)
{
    int status, r;

    lua_settop(L, 0);
    r = pushline(L, 1);
    if (r == LINE_EOF)
        return -1;
    if (r == LINE_INTR)
        return -2;
    if ((status = addreturn(L)) == LUA_OK) {
        lua_remove(L, 1);  /* the line; the chunk stays */
        return status;
    }
    for (;;) {  /* a statement, possibly over several lines */
        size_t len;
        const char *buf = lua_tolstring(L, 1, &len);

        status = luaL_loadbuffer(L, buf, len, "=stdin");
        if (!incomplete(L, status))
            break;
        r = pushline(L, 0);
        if (r == LINE_INTR)
            return -2;
        if (r == LINE_EOF) {
            /* Report the unfinished statement as lua.c does. */
            status = luaL_loadbuffer(L, buf, len, "=stdin");
            break;
        }
        lua_pushliteral(L, "\n");
        lua_insert(L, -2);
        lua_concat(L, 3);
    }
    save_line(lua_tostring(L, 1));
    lua_remove(L, 1);  /* the source; the chunk or the error stays */
    return status;
}

static int print_values(lua_State *L)
{
    int i, n = lua_gettop(L);

    for (i = 1; i <= n; i++) {
        size_t len;
        const char *s = luaL_tolstring(L, i, &len);
        if (i > 1)
            lua_writestring("\t", 1);
        lua_writestring(s, len);
        lua_pop(L, 1);
    }
    lua_writeline();
    return 0;
}

/* Results go to hcp_repl_print when the Lua side defines it (pretty tables). */
static void l_print(lua_State *L)
{
    int n = lua_gettop(L);

    if (n == 0)
        return;
    luaL_checkstack(L, LUA_MINSTACK, "too many results to print");
    if (lua_getglobal(L, "hcp_repl_print") != LUA_TFUNCTION) {
        lua_pop(L, 1);
        lua_pushcfunction(L, print_values);
    }
    lua_insert(L, 1);
    hcp_lua_report(L, hcp_lua_docall(L, n, 0));
}

/* hcp = require("hcp"), rt = hcp.repl_runtime(): both optional, so a
 * missing module is silent; any other failure is a one-line warning. */
static const char repl_init[] =
    "local ok, h = pcall(require, 'hcp')\n"
    "if not ok then\n"
    "  h = tostring(h)\n"
    "  if h:find(\"module 'hcp' not found\", 1, true) then return nil end\n"
    "  return 'require(\"hcp\") failed: ' .. h\n"
    "end\n"
    /* a script run before the REPL (-i script) may have set its own */
    "if hcp == nil then hcp = h end\n"
    "if rt ~= nil then return nil end\n"
    "local f = type(h) == 'table' and rawget(h, 'repl_runtime')\n"
    "if type(f) ~= 'function' then return nil end\n"
    "local ok2, r = pcall(f)\n"
    "if not ok2 then return 'hcp.repl_runtime() failed: ' .. tostring(r) end\n"
    "rt = r\n";

static void repl_setup(lua_State *L)
{
    int status = luaL_loadbuffer(L, repl_init, sizeof repl_init - 1, "=repl_init");

    if (status == LUA_OK)
        status = lua_pcall(L, 0, 1, 0);
    if (lua_type(L, -1) == LUA_TSTRING) {
        const char *msg = lua_tostring(L, -1);
        fprintf(stderr, "hcp-lua: warning: %.*s\n", (int)strcspn(msg, "\n"), msg);
    }
    lua_pop(L, 1);
}

static void mkdir_quiet(const char *dir)
{
    /* Failures only mean no history file; readline reports nothing either. */
    (void)mkdir(dir, 0700);
}

/* $XDG_STATE_HOME/hcp/history, else ~/.local/state/hcp/history. */
static char *history_path(void)
{
    const char *state = getenv("XDG_STATE_HOME");
    const char *home = getenv("HOME");
    char *dir = NULL, *file = NULL;

    if (state && state[0] == '/') {  /* XDG: relative values are invalid */
        mkdir_quiet(state);
        if (asprintf(&dir, "%s/hcp", state) < 0)
            return NULL;
    } else if (home && home[0] == '/') {
        char *tmp;
        if (asprintf(&tmp, "%s/.local", home) < 0)
            return NULL;
        mkdir_quiet(tmp);
        free(tmp);
        if (asprintf(&tmp, "%s/.local/state", home) < 0)
            return NULL;
        mkdir_quiet(tmp);
        free(tmp);
        if (asprintf(&dir, "%s/.local/state/hcp", home) < 0)
            return NULL;
    } else {
        return NULL;
    }
    mkdir_quiet(dir);
    if (asprintf(&file, "%s/history", dir) < 0)
        file = NULL;
    free(dir);
    return file;
}

static void history_open(void)
{
    histfile = history_path();
    if (!histfile)
        return;
    using_history();
    stifle_history(HISTORY_MAX);
    /* append_history needs an existing file: create it (0600) when absent. */
    if (read_history(histfile) != 0)
        (void)write_history(histfile);
}

static void history_close(void)
{
    if (histfile) {
        (void)history_truncate_file(histfile, HISTORY_MAX);
        free(histfile);
        histfile = NULL;
    }
}

void hcp_lua_repl(lua_State *L)
{
    int status;
    const char *oldprogname = hcp_lua_progname;

    use_readline = isatty(STDIN_FILENO);
    if (use_readline) {
        rl_readline_name = "hcp";
        rl_catch_signals = 0;  /* our own SIGINT handling, see readline_intr */
        history_open();
    }
    repl_setup(L);
    hcp_lua_progname = NULL;
    while ((status = loadline(L)) != -1) {
        if (status == -2)
            continue;
        if (status == LUA_OK)
            status = hcp_lua_docall(L, 0, LUA_MULTRET);
        if (status == LUA_OK)
            l_print(L);
        else
            hcp_lua_report(L, status);
    }
    lua_settop(L, 0);
    if (!use_readline)  /* readline has ended the line already */
        lua_writeline();
    hcp_lua_progname = oldprogname;
    if (use_readline)
        history_close();
}
