/* egress_child.c — how the proxy gets into the child's network namespace:
 * the fork child, just after unshare(CLONE_NEWNET), brings its loopback up
 * and listens on it, then hands the listening sockets to the runtime over
 * a socketpair (SCM_RIGHTS) and keeps no copy. The runtime accepts on them
 * (accept works from any namespace; the connections belong to the child's)
 * and connects out from its own namespace. The child's namespace keeps no
 * route anywhere else. Between fork and exec: syscalls only. */
#include "egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

static int lo_up(void)
{
    struct ifreq ifr;
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    memset(&ifr, 0, sizeof ifr);
    memcpy(ifr.ifr_name, "lo", 3);
    int r = ioctl(s, SIOCGIFFLAGS, &ifr);
    if (r == 0) {
        ifr.ifr_flags |= IFF_UP;
        r = ioctl(s, SIOCSIFFLAGS, &ifr);
    }
    int e = errno;
    close(s);
    errno = e;
    return r;
}

/* A listening socket on addr, or -1 with errno. */
static int listen_on(int family, const void *addr, socklen_t len)
{
    int one = 1;
    int s = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    if ((family == AF_INET6 && setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(s, addr, len) < 0 || listen(s, 64) < 0) {
        int e = errno;
        close(s);
        errno = e;
        return -1;
    }
    return s;
}

int hcp_egress_listen(int sock)
{
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    int fds[2], n = 0;
    if (lo_up() < 0)
        return -1;
    memset(&a4, 0, sizeof a4);
    a4.sin_family = AF_INET;
    a4.sin_port = htons(HCP_EGRESS_PORT);
    a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if ((fds[n] = listen_on(AF_INET, &a4, sizeof a4)) < 0)
        return -1;
    n++;
    memset(&a6, 0, sizeof a6);
    a6.sin6_family = AF_INET6;
    a6.sin6_port = htons(HCP_EGRESS_PORT);
    a6.sin6_addr = (struct in6_addr)IN6ADDR_LOOPBACK_INIT;   /* not libc's variable: the helper has none */
    /* no IPv6 in this kernel (or ::1 not there): the IPv4 listener alone */
    if ((fds[n] = listen_on(AF_INET6, &a6, sizeof a6)) >= 0)
        n++;
    else if (errno != EAFNOSUPPORT && errno != EADDRNOTAVAIL)
        return -1;
    int r = hcp_send_fds(sock, 'L', fds, n);
    int e = errno;
    for (int i = 0; i < n; i++)
        close(fds[i]);
    errno = e;
    return r;
}

int hcp_egress_receive(int sock, int *fds, int max)
{
    char byte;
    int n = hcp_recv_fds(sock, MSG_DONTWAIT, &byte, fds, max);
    if (n == -1 && errno != EAGAIN && errno != EMSGSIZE)
        return -1;
    if (n <= 0 || byte != 'L') {
        for (int i = 0; i < n; i++)
            close(fds[i]);
        errno = EPROTO;
        return -1;
    }
    return n;
}
