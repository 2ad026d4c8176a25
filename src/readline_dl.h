/* readline_dl.h — GNU readline for the REPL, loaded when the REPL starts on
 * a terminal, not linked. Linked, libreadline and libtinfo were mapped and
 * relocated at every start of hcp-lua, hcp and hcpx: 0.19 ms of each
 * `hcp run` (measured here, against the same program without them), for a
 * library only the interactive prompt uses.
 *
 * The header gives the types; hcp_rl holds the library's own functions and
 * variables, found with dlsym, so `*hcp_rl.point` is readline's rl_point. */
#ifndef HCP_READLINE_DL_H
#define HCP_READLINE_DL_H

#include <stddef.h>
#include <stdio.h>

#include <readline/history.h>
#include <readline/readline.h>

struct hcp_readline {
    /* line reading through the callback interface */
    void (*callback_handler_install)(const char *, rl_vcpfunc_t *);
    void (*callback_handler_remove)(void);
    void (*callback_read_char)(void);
    void (*callback_sigcleanup)(void);
    void (*free_line_state)(void);
    void (*replace_line)(const char *, int);
    int (*insert_text)(const char *);
    int (*complete)(int, int);
    int (*bind_key)(int, rl_command_func_t *);
    char **(*completion_matches)(const char *, rl_compentry_func_t *);
    /* history */
    void (*using_history)(void);
    void (*stifle_history)(int);
    void (*add_history)(const char *);
    int (*append_history)(int, const char *);
    int (*read_history)(const char *);
    int (*write_history)(const char *);
    void (*clear_history)(void);
    /* variables */
    FILE **instream, **outstream;
    char **line_buffer;
    int *point;
    const char **readline_name;
    int *catch_signals;
    const char **basic_quote_characters;
    rl_cpvfunc_t **completion_word_break_hook;
    rl_completion_func_t **attempted_completion_function;
    int *attempted_completion_over;
    int *completion_append_character;
    int *completion_suppress_quote;
    char *history_comment_char;
    int *history_write_timestamps;
};

extern struct hcp_readline hcp_rl;

/* Loads libreadline.so.8 once. 0, or -1 with why in err. */
int hcp_readline_load(char *err, size_t size);

#endif
