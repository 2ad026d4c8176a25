/* readline_dl.c — loading GNU readline for the REPL (see readline_dl.h).
 * dlopen by soname, as the dynamic linker would have found it at start; a
 * host without it gets a REPL without line editing, and is told why. */
#include "readline_dl.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

struct hcp_readline hcp_rl;

/* Every member of hcp_rl is a pointer (to a function or to a variable of
 * the library) and is set from the symbol of the same name. POSIX makes a
 * function's address fit a void *, which dlsym returns. */
#define SYM(name, member) { name, offsetof(struct hcp_readline, member) }
static const struct { const char *name; size_t off; } syms[] = {
    SYM("rl_callback_handler_install", callback_handler_install),
    SYM("rl_callback_handler_remove", callback_handler_remove),
    SYM("rl_callback_read_char", callback_read_char),
    SYM("rl_callback_sigcleanup", callback_sigcleanup),
    SYM("rl_free_line_state", free_line_state),
    SYM("rl_replace_line", replace_line),
    SYM("rl_insert_text", insert_text),
    SYM("rl_complete", complete),
    SYM("rl_bind_key", bind_key),
    SYM("rl_completion_matches", completion_matches),
    SYM("using_history", using_history),
    SYM("stifle_history", stifle_history),
    SYM("add_history", add_history),
    SYM("append_history", append_history),
    SYM("read_history", read_history),
    SYM("write_history", write_history),
    SYM("clear_history", clear_history),
    SYM("rl_instream", instream),
    SYM("rl_outstream", outstream),
    SYM("rl_line_buffer", line_buffer),
    SYM("rl_point", point),
    SYM("rl_readline_name", readline_name),
    SYM("rl_catch_signals", catch_signals),
    SYM("rl_basic_quote_characters", basic_quote_characters),
    SYM("rl_completion_word_break_hook", completion_word_break_hook),
    SYM("rl_attempted_completion_function", attempted_completion_function),
    SYM("rl_attempted_completion_over", attempted_completion_over),
    SYM("rl_completion_append_character", completion_append_character),
    SYM("rl_completion_suppress_quote", completion_suppress_quote),
    SYM("history_comment_char", history_comment_char),
    SYM("history_write_timestamps", history_write_timestamps),
};

_Static_assert(sizeof(struct hcp_readline) == sizeof syms / sizeof syms[0] * sizeof(void *),
               "every member of hcp_rl has its symbol in syms");

#define SONAME "libreadline.so.8"

int hcp_readline_load(char *err, size_t size)
{
    static int loaded;
    if (loaded)
        return 0;
    void *lib = dlopen(SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        const char *why = dlerror();
        snprintf(err, size, "%s", why ? why : SONAME ": cannot be loaded");
        return -1;
    }
    struct hcp_readline got;
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
        void *p = dlsym(lib, syms[i].name);
        if (!p) {
            snprintf(err, size, "%s: no symbol %s", SONAME, syms[i].name);
            dlclose(lib);
            return -1;
        }
        memcpy((char *)&got + syms[i].off, &p, sizeof p);
    }
    hcp_rl = got;   /* all or nothing: a half-filled table is never used */
    loaded = 1;
    return 0;
}
