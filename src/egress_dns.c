/* egress_dns.c — the proxy's name lookups, made by the runtime (never the
 * child) without blocking its loop: glibc's getaddrinfo_a with no
 * notification, polled from the proxy's timer. It answers as the host's
 * own resolver does (nsswitch: /etc/hosts, DNS, whatever the host has
 * configured), with no library beside the C library. A lookup the resolver
 * is still running when its connection goes away cannot be freed yet (the
 * resolver writes into it): it waits on a list until it is done. */
#include "egress.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct hcp_lookup {
    struct gaicb cb;
    struct addrinfo hints;
    char host[HCP_HTTP_HOST_MAX];
    char port[8];
    struct hcp_lookup *next;   /* on the orphan list */
};

static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hcp_lookup *orphans;

static void free_lookup(struct hcp_lookup *lk)
{
    if (lk->cb.ar_result)
        freeaddrinfo(lk->cb.ar_result);
    free(lk);
}

/* Frees the orphans the resolver has finished with. */
static void reap_orphans(void)
{
    pthread_mutex_lock(&orphans_lock);
    for (struct hcp_lookup **at = &orphans; *at;) {
        struct hcp_lookup *lk = *at;
        if (gai_error(&lk->cb) != EAI_INPROGRESS) {
            *at = lk->next;
            free_lookup(lk);
        } else {
            at = &lk->next;
        }
    }
    pthread_mutex_unlock(&orphans_lock);
}

struct hcp_lookup *hcp_lookup_start(const char *host, int port, int *err)
{
    reap_orphans();
    struct hcp_lookup *lk = calloc(1, sizeof *lk);
    if (!lk) {
        *err = EAI_MEMORY;
        return NULL;
    }
    snprintf(lk->host, sizeof lk->host, "%s", host);
    snprintf(lk->port, sizeof lk->port, "%d", port);
    lk->hints.ai_family = AF_UNSPEC;
    lk->hints.ai_socktype = SOCK_STREAM;
    lk->hints.ai_flags = AI_NUMERICSERV;
    lk->cb.ar_name = lk->host;
    lk->cb.ar_service = lk->port;
    lk->cb.ar_request = &lk->hints;
    struct gaicb *list[1] = { &lk->cb };
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_NONE;
    int r = getaddrinfo_a(GAI_NOWAIT, list, 1, &sev);
    if (r != 0) {
        free(lk);
        *err = r;
        return NULL;
    }
    return lk;
}

int hcp_lookup_poll(struct hcp_lookup *lk, const struct addrinfo **res)
{
    int r = gai_error(&lk->cb);
    if (r == 0)
        *res = lk->cb.ar_result;
    return r;
}

void hcp_lookup_drop(struct hcp_lookup *lk)
{
    if (!lk)
        return;
    if (gai_error(&lk->cb) == EAI_INPROGRESS && gai_cancel(&lk->cb) != EAI_CANCELED &&
        gai_error(&lk->cb) == EAI_INPROGRESS) {
        pthread_mutex_lock(&orphans_lock);
        lk->next = orphans;
        orphans = lk;
        pthread_mutex_unlock(&orphans_lock);
        return;
    }
    free_lookup(lk);
}
