/* repl.c — the interactive REPL of hcp-lua.
 *
 * As lua.c's: a line is tried as an expression first, an unfinished statement
 * continues on the next line, results are printed. Additions: readline with a
 * history file when stdin is a terminal (a multi-line chunk is one entry),
 * Ctrl-C at the prompt drops the line, TAB completes what hcp.repl.complete
 * offers, results go to hcp_repl_print when defined, hcp and rt are
 * preloaded, and hcp.repl.tty tells the Lua side the terminal's width. */
#include "hcp_lua.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

#include "readline_dl.h"

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
    hcp_rl.callback_handler_remove();
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
    hcp_rl.callback_handler_install(prompt, on_rl_line);
    pfd.fd = fileno(*hcp_rl.instream ? *hcp_rl.instream : stdin);
    pfd.events = POLLIN;
    while (!line_done) {
        if (prompt_interrupted) {
            /* Drop the half-typed line and start afresh on a new prompt. */
            hcp_rl.free_line_state();
            hcp_rl.callback_sigcleanup();
            hcp_rl.replace_line("", 0);
            hcp_rl.callback_handler_remove();
            fputs("\n", *hcp_rl.outstream ? *hcp_rl.outstream : stdout);
            result = LINE_INTR;
            break;
        }
        if (ppoll(&pfd, 1, NULL, &orig) < 0) {
            if (errno == EINTR)
                continue;
            hcp_rl.callback_handler_remove();  /* unusable terminal: treat as EOF */
            break;
        }
        hcp_rl.callback_read_char();
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
    hcp_rl.add_history(line);
    /* Appended at once so a crash or kill loses nothing; failures (read-only
     * home, …) only cost the history. */
    if (histfile)
        (void)hcp_rl.append_history(1, histfile);
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

/* ---- TAB completion ---------------------------------------------------
 *
 * hcp.repl.complete(line before the cursor, _G) -> candidates, start does
 * the work; here it is only asked, and its answer handed to readline. The
 * word readline replaces must begin where the Lua side's does: the word
 * break hook (called first on TAB) asks Lua and returns as break set the one
 * character before that word; the generator still adjusts each candidate if
 * readline's word turned out to start elsewhere. */

static lua_State *replL;     /* the state the REPL runs, for the callbacks */
static char **cands;         /* the last answer: candidates ... */
static int ncands;
static int cand_start = -1;  /* ... and where their word starts (0-based); -1: none */
static char break_set[2];    /* the break set returned to readline */

static void cands_clear(void)
{
    int i;

    for (i = 0; i < ncands; i++)
        free(cands[i]);
    free(cands);
    cands = NULL;
    ncands = 0;
    cand_start = -1;
}

/* Protected: pushes hcp.repl.complete(line, _G)'s two results; the module
 * as loaded already, else through require. */
static int complete_in_lua(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    if (lua_getfield(L, -1, "hcp.repl") != LUA_TTABLE) {
        lua_getglobal(L, "require");
        lua_pushliteral(L, "hcp.repl");
        lua_call(L, 1, 1);
    }
    lua_getfield(L, -1, "complete");
    lua_pushvalue(L, 1);
    lua_pushglobaltable(L);
    lua_call(L, 2, 2);
    return 2;
}

/* Asks Lua about readline's line buffer up to its point; any failure means no
 * candidates (completion must never break the prompt). */
static void cands_fill(void)
{
    lua_State *L = replL;
    int top = lua_gettop(L), i, n;
    lua_Integer start, len;

    cands_clear();
    lua_pushcfunction(L, complete_in_lua);
    lua_pushlstring(L, *hcp_rl.line_buffer, (size_t)*hcp_rl.point);
    if (lua_pcall(L, 1, 2, 0) != LUA_OK || !lua_istable(L, -2) || !lua_isinteger(L, -1))
        goto done;
    start = lua_tointeger(L, -1);
    len = (lua_Integer)lua_rawlen(L, -2);
    if (start < 1 || start > (lua_Integer)*hcp_rl.point + 1 || len <= 0 || len > 100000)
        goto done;
    n = (int)len;
    if (!(cands = calloc((size_t)n, sizeof *cands)))
        goto done;
    cand_start = (int)start - 1;
    for (i = 1; i <= n; i++) {
        const char *c;
        lua_rawgeti(L, -2, i);
        c = lua_tostring(L, -1);
        if (c && (cands[ncands] = strdup(c)) != NULL)
            ncands++;
        lua_pop(L, 1);
    }
done:
    lua_settop(L, top);
}

static char *word_break_hook(void)
{
    cands_fill();
    break_set[0] = cand_start > 0 ? (*hcp_rl.line_buffer)[cand_start - 1] : '\0';
    break_set[1] = '\0';
    return break_set;
}

/* Candidate i as a replacement of the word readline chose, at `start`. */
static char *cand_for(int i, int start)
{
    const char *c = cands[i];
    size_t skip, lead;
    char *out;

    if (start >= cand_start) {
        skip = (size_t)(start - cand_start);
        if (strlen(c) < skip || strncmp(c, *hcp_rl.line_buffer + cand_start, skip) != 0)
            return NULL;
        return strdup(c + skip);
    }
    lead = (size_t)(cand_start - start);
    if (!(out = malloc(lead + strlen(c) + 1)))
        return NULL;
    memcpy(out, *hcp_rl.line_buffer + start, lead);
    strcpy(out + lead, c);
    return out;
}

static int gen_start;

static char *cand_generator(const char *text, int state)
{
    static int next;
    char *m = NULL;

    (void)text;
    if (state == 0)
        next = 0;
    while (!m && next < ncands)
        m = cand_for(next++, gen_start);
    return m;
}

static char **attempt_completion(const char *text, int start, int end)
{
    char **matches = NULL;

    (void)end;
    *hcp_rl.attempted_completion_over = 1;  /* never fall back to file names */
    *hcp_rl.completion_append_character = '\0';
    *hcp_rl.completion_suppress_quote = 1;
    if (cand_start < 0)  /* the hook was not called for this completion */
        cands_fill();
    gen_start = start;
    if (ncands > 0)
        matches = hcp_rl.completion_matches(text, cand_generator);
    cands_clear();
    return matches;
}

/* TAB on a blank line (so far) indents, as pasted code expects. */
static int tab_key(int count, int key)
{
    int i;

    for (i = 0; i < *hcp_rl.point; i++)
        if ((*hcp_rl.line_buffer)[i] != ' ' && (*hcp_rl.line_buffer)[i] != '\t')
            return hcp_rl.complete(count, key);
    return hcp_rl.insert_text("\t") >= 0 ? 0 : 1;
}

static void completion_setup(lua_State *L)
{
    replL = L;
    /* no quote handling of readline's own: it would append the quote that
     * precedes the word (the Lua side closes a string it completed) */
    *hcp_rl.basic_quote_characters = "";
    *hcp_rl.completion_word_break_hook = word_break_hook;
    *hcp_rl.attempted_completion_function = attempt_completion;
    hcp_rl.bind_key('\t', tab_key);
}

/* ---- hcp.repl.tty: the terminal's width, for hcp.repl.width ----------- */

static int tty_width(lua_State *L)
{
    struct winsize ws;

    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        lua_pushinteger(L, ws.ws_col);
    else
        lua_pushnil(L);  /* not a terminal: the Lua side falls back to $COLUMNS */
    return 1;
}

static int open_tty(lua_State *L)
{
    lua_newtable(L);
    lua_pushcfunction(L, tty_width);
    lua_setfield(L, -2, "width");
    return 1;
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
    int status;

    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
    lua_pushcfunction(L, open_tty);
    lua_setfield(L, -2, "hcp.repl.tty");
    lua_pop(L, 1);
    status = luaL_loadbuffer(L, repl_init, sizeof repl_init - 1, "=repl_init");

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

/* A file written with timestamps starts with one ("#" and a digit): only
 * then does readline join the lines of a multi-line entry on reading. */
static int history_has_stamps(const char *file)
{
    FILE *f = fopen(file, "re");
    int c0, c1;

    if (!f)
        return 1;  /* nothing to convert */
    c0 = getc(f);
    c1 = getc(f);
    fclose(f);
    return c0 == EOF || (c0 == '#' && c1 >= '0' && c1 <= '9');
}

static void history_open(void)
{
    histfile = history_path();
    if (!histfile)
        return;
    hcp_rl.using_history();
    hcp_rl.stifle_history(HISTORY_MAX);
    /* Each entry is written after a timestamp line, so the lines of a
     * multi-line chunk read back as one entry. */
    *hcp_rl.history_comment_char = '#';
    *hcp_rl.history_write_timestamps = 1;
    /* append_history needs an existing file: create it (0600) when absent;
     * rewrite one of an older hcp-lua, which had no timestamps. */
    if (hcp_rl.read_history(histfile) != 0 || !history_has_stamps(histfile))
        (void)hcp_rl.write_history(histfile);
}

static void history_close(void)
{
    if (histfile) {
        /* The last HISTORY_MAX entries, whole (history_truncate_file counts
         * lines and can cut a multi-line entry), re-read first so that what
         * another session appended meanwhile stays. */
        hcp_rl.clear_history();
        if (hcp_rl.read_history(histfile) == 0)
            (void)hcp_rl.write_history(histfile);
        free(histfile);
        histfile = NULL;
    }
}

void hcp_lua_repl(lua_State *L)
{
    int status;
    const char *oldprogname = hcp_lua_progname;

    const char *want = getenv("HCP_READLINE");
    use_readline = isatty(STDIN_FILENO) && !(want && strcmp(want, "none") == 0);
    if (use_readline) {
        char why[256];
        if (hcp_readline_load(why, sizeof why) < 0) {
            /* said, not hidden: the prompt works, without editing or history */
            fprintf(stderr, "hcp-lua: no line editing: %s\n", why);
            use_readline = 0;
        }
    }
    if (use_readline) {
        *hcp_rl.readline_name = "hcp";
        *hcp_rl.catch_signals = 0;  /* our own SIGINT handling, see readline_intr */
        history_open();
        completion_setup(L);
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
