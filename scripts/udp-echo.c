/* A bare UDP echo server: the floor that a UDP answer costs on this machine.
 *
 * Binds 127.0.0.1 on the port given (0: any), prints `listening PORT`, and sends every
 * datagram back to its sender as it came, one recvfrom and one sendto each, nothing
 * else. On SIGTERM or SIGINT it prints `echoed N datagrams, CPU S s, U us a datagram`
 * (its own user and system time, from getrusage) and exits. Built and used by
 * scripts/bench-udp-echo.sh, which offers it the same load as an hdl node.
 *
 * Usage: udp-echo [PORT]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

static volatile sig_atomic_t stopping = 0;

static void stop(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

static double seconds_of(struct timeval time) {
    return (double)time.tv_sec + (double)time.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 0;
    int sock = socket(AF_INET, SOCK_DGRAM, 0);
    if (sock < 0) {
        perror("socket");
        return 1;
    }
    struct sockaddr_in address = {0};
    address.sin_family = AF_INET;
    address.sin_port = htons((unsigned short)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(sock, (struct sockaddr *)&address, sizeof address) < 0) {
        perror("bind");
        return 1;
    }
    socklen_t length = sizeof address;
    getsockname(sock, (struct sockaddr *)&address, &length);
    printf("listening %d\n", ntohs(address.sin_port));
    fflush(stdout);

    struct sigaction action = {0};
    action.sa_handler = stop; /* no SA_RESTART: a signal ends the blocked recvfrom */
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGINT, &action, NULL);

    unsigned long long echoed = 0;
    char buffer[65536];
    while (!stopping) {
        struct sockaddr_in peer;
        socklen_t peer_length = sizeof peer;
        ssize_t received = recvfrom(sock, buffer, sizeof buffer, 0, (struct sockaddr *)&peer,
                                    &peer_length);
        if (received < 0) {
            if (errno == EINTR) continue;
            perror("recvfrom");
            return 1;
        }
        if (sendto(sock, buffer, (size_t)received, 0, (struct sockaddr *)&peer, peer_length) >= 0)
            echoed++;
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = seconds_of(usage.ru_utime) + seconds_of(usage.ru_stime);
    printf("echoed %llu datagrams, CPU %.2f s, %.1f us a datagram\n", echoed, cpu,
           echoed ? cpu * 1e6 / (double)echoed : 0.0);
    return 0;
}
