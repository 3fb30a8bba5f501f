/*
 * lat_tcp.c -- TCP round-trip ("hot potato") latency, after lmbench 3.
 *
 * What it measures
 *   The time for one message of msize bytes to go from a client to a server
 *   over an established TCP connection and back again.  The client writes
 *   msize bytes, the server reads them all and writes them back, the client
 *   reads them all; repeat.  Only one message is ever in flight, so the
 *   result is the full round-trip cost: two trips through the socket layer,
 *   the TCP/IP stack, the (loopback or real) device, two wakeups and context
 *   switches.  Connection setup is not timed.
 *
 * Method and source
 *   lmbench 3 lat_tcp.c (protocol), by Larry McVoy and Carl Staelin; see
 *   McVoy & Staelin, "lmbench: Portable tools for performance analysis",
 *   USENIX Annual Technical Conference 1996.  This is an independent
 *   re-implementation of that protocol, with two deliberate differences:
 *   every failure (connect refused, short read, peer closed) is an error
 *   with exit status 1 and no number -- the original ignores a failed
 *   connect and still prints a (bogus, tiny) latency -- and the result is
 *   also printed as one JSON line.  -L brings the original's behaviour back
 *   for the lab's no-server experiment (below).
 *
 *   Protocol: the client connects and sends a 4-byte big-endian word whose
 *   low 31 bits are msize.  The high bit (NODELAY_FLAG) is our extension:
 *   it asks the server to set TCP_NODELAY on its side too (-n).  A word of
 *   0 (msize 0) asks the server to shut down.  The server forks one child
 *   per connection, as lmbench does; on a shutdown request or SIGTERM it
 *   ends its remaining children and exits 0.
 *
 *   Timing: our own calibration, not lmbench's benchmp().  Ours first makes
 *   16 untimed round trips (warm-up), then starts at 1 round trip per batch
 *   and doubles the count until a batch lasts at least 1/8 of the target
 *   sample time (-t), then scales the count so one batch lasts about the
 *   target, times one batch at that count and scales again while it is off
 *   by more than 2x (at most 4 times).  Then N batches are timed with
 *   CLOCK_MONOTONIC (nanoseconds) and every one is kept; each sample is
 *   elapsed / iterations, nothing subtracted.  The reported value is the median
 *   sample (mean of the middle two when N is even); lmbench also reports a
 *   median of its repetitions.  Where benchmp (lmbench 3 lib_timing.c,
 *   benchmp_interval) differs: it multiplies the count by 8 while a batch
 *   lasts 150 us or less, then scales it to 1.1 x its "enough" interval;
 *   it keeps only batches longer than 0.95 x enough; it subtracts its
 *   measured timing and loop overheads from each batch; it reads the time
 *   with gettimeofday (microseconds).  Our figures are therefore not
 *   lmbench's to the last digit, only the same quantity.
 *
 *   -L (lmbench 3.0-a9's unchecked client): a refused connect is retried
 *   10 more times, as lmbench's tcp_connect does, then the client goes on
 *   with descriptor -1, as lmbench's caller does; the size word, every
 *   write and every read are issued without looking at their results (as
 *   lmbench's init and doclient do; a short read is not completed either).
 *   With no server, each "round trip" is then a write and a read on
 *   descriptor -1, both failing at once with EBADF, and a number is
 *   printed.  The JSON line says so: "unchecked":true, "connected":false,
 *   and "failed_calls", the writes and reads of the timed batches that
 *   returned an error.
 *
 * Usage
 *   lat_tcp -s [-p port] [-b addr]        run the server (foreground)
 *   lat_tcp -S [-p port] host             ask the server to exit
 *   lat_tcp [-m msize] [-N reps] [-p port] [-t seconds] [-n] [-L] host
 *   Defaults: port 31234, addr 127.0.0.1, msize 1, N 11, t 2.0, no NODELAY.
 *
 * Output (client)
 *   stderr, exactly lmbench's line:
 *     TCP latency using <host>: <median, %.4f> microseconds
 *   stdout, one JSON line (all times in microseconds, samples in order):
 *     {"tool":"lat_tcp","host":"127.0.0.1","port":31234,"msize":1,
 *      "nodelay":false,"unchecked":false,"connected":true,
 *      "failed_calls":0,"iterations":N,"target_s":2.0,"unit":"us",
 *      "median":M,"min":A,"max":B,"samples":[s1,...,sN]}
 *   Exit status: 0 ok, 1 runtime error (no number printed), 2 bad usage.
 *   With -L, a failed connect, read or write is not an error (see above).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>   /* isfinite */
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_PORT 31234
#define MAX_MSIZE    (16L * 1024 * 1024)
#define MAX_REPS     1000
#define NODELAY_FLAG 0x80000000u   /* high bit of the size word: "-n" */

static const char usage_text[] =
    "usage: lat_tcp -s [-p port] [-b addr]\n"
    "       lat_tcp -S [-p port] host\n"
    "       lat_tcp [-m msize[k|m]] [-N reps] [-p port] [-t seconds] [-n] [-L] host\n"
    "  -s  run the server in the foreground (bind addr, default 127.0.0.1)\n"
    "  -S  tell the server on host to exit\n"
    "  -m  message size in bytes, 1..16777216 (default 1)\n"
    "  -N  number of samples, 1..1000 (default 11)\n"
    "  -p  TCP port, 1..65535 (default 31234)\n"
    "  -t  target seconds per sample, >0 and <=60 (default 2.0)\n"
    "  -n  set TCP_NODELAY on client and server sockets\n"
    "  -L  lmbench 3.0-a9's unchecked client: a failed connect, write or read\n"
    "      is ignored (with no server it times calls on descriptor -1)\n";

_Noreturn static void usage_error(const char *msg, const char *arg)
{
    fprintf(stderr, "lat_tcp: %s%s\n%s", msg, arg ? arg : "", usage_text);
    exit(2);
}

/* One-line runtime error on stderr, exit 1 (and never a number). */
__attribute__((format(printf, 1, 2)))
_Noreturn static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("lat_tcp: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

/* Whole-number option in [lo, hi]; optional k/m suffix if allow_suffix. */
static long parse_long(const char *s, long lo, long hi, int allow_suffix,
                       const char *name)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || errno || v < lo || v > hi)
        usage_error("bad value for ", name);
    if (allow_suffix && (*end == 'k' || *end == 'K')) { v *= 1024; end++; }
    else if (allow_suffix && (*end == 'm' || *end == 'M')) { v *= 1048576; end++; }
    if (*end != '\0' || v > hi)
        usage_error("bad value for ", name);
    return (long)v;
}

/* Read exactly n bytes.  1 = done, 0 = EOF first, -1 = error (errno). */
static int read_full(int fd, void *buf, size_t n)
{
    char *p = buf;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return (int)r;
        p += r;
        n -= (size_t)r;
    }
    return 1;
}

/* Write exactly n bytes.  0 = done, -1 = error (EPIPE since SIGPIPE is off). */
static int write_full(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ------------------------------------------------------------ server --- */

/* A connection child exits with this status after a shutdown request; the
 * parent sees it when reaping (lmbench's child does kill(getppid(), SIGTERM)
 * instead, which can leave the child orphaned). */
#define EXIT_SHUTDOWN 3
#define MAX_CHILDREN  256

static volatile sig_atomic_t stop_requested;
static pid_t children[MAX_CHILDREN];    /* live connection children, 0 = free */

static void on_sigterm(int sig) { (void)sig; stop_requested = 1; }

static void on_sigchld(int sig)         /* reap every finished child */
{
    int saved = errno, status;
    pid_t pid;
    (void)sig;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        for (int i = 0; i < MAX_CHILDREN; i++)
            if (children[i] == pid)
                children[i] = 0;
        if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_SHUTDOWN)
            stop_requested = 1;
    }
    errno = saved;
}

/* One connection: size word, then echo msize-byte messages until EOF. */
static void serve_connection(int fd)
{
    uint32_t word;
    if (read_full(fd, &word, sizeof word) != 1)
        exit(0);                        /* connected and left: ignore */
    word = ntohl(word);
    size_t msize = word & ~NODELAY_FLAG;
    if (msize == 0)                     /* shutdown request (lat_tcp -S) */
        exit(EXIT_SHUTDOWN);
    if (msize > (size_t)MAX_MSIZE)
        exit(1);
    if (word & NODELAY_FLAG) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    char *buf = malloc(msize);
    if (!buf)
        exit(1);
    for (;;) {
        int r = read_full(fd, buf, msize);
        if (r == 0)
            exit(0);                    /* client is done */
        if (r < 0 || write_full(fd, buf, msize) < 0)
            exit(1);
    }
}

static int run_server(const char *addr, int port)
{
    struct sockaddr_in sin = { .sin_family = AF_INET, .sin_port = htons(port) };
    inet_pton(AF_INET, addr, &sin.sin_addr);    /* validated in main */

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    if (ls < 0)
        die("socket: %s", strerror(errno));
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (struct sockaddr *)&sin, sizeof sin) < 0 || listen(ls, 64) < 0)
        die("cannot listen on %s:%d: %s", addr, port, strerror(errno));

    /* SIGCHLD, SIGTERM and SIGINT stay blocked except inside ppoll(): no
     * stop request slips in between testing the flag and going to sleep,
     * and the children table only changes while we wait. */
    struct sigaction sa = { .sa_handler = on_sigchld };
    sigemptyset(&sa.sa_mask);
    sigaction(SIGCHLD, &sa, NULL);
    sa.sa_handler = on_sigterm;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigset_t block, waitmask;
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &waitmask);

    fprintf(stderr, "lat_tcp: server listening on %s:%d\n", addr, port);
    fflush(stderr);

    while (!stop_requested) {
        struct pollfd pfd = { .fd = ls, .events = POLLIN };
        if (ppoll(&pfd, 1, NULL, &waitmask) <= 0)
            continue;                   /* EINTR: a child ended or a stop */
        int fd = accept(ls, NULL, NULL), slot = 0;
        if (fd < 0)
            continue;                   /* e.g. ECONNABORTED: try again */
        while (slot < MAX_CHILDREN && children[slot])
            slot++;
        pid_t pid = slot < MAX_CHILDREN ? fork() : -1;
        if (pid == 0) {                 /* child: default signals, serve */
            close(ls);
            signal(SIGCHLD, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGINT, SIG_DFL);
            sigprocmask(SIG_SETMASK, &waitmask, NULL);
            serve_connection(fd);
        }
        if (pid < 0)
            fprintf(stderr, "lat_tcp: cannot serve a connection: %s\n",
                    slot < MAX_CHILDREN ? strerror(errno) : "too many");
        else
            children[slot] = pid;
        close(fd);
    }
    close(ls);
    for (int i = 0; i < MAX_CHILDREN; i++)      /* end and reap the rest */
        if (children[i] && kill(children[i], SIGTERM) == 0)
            waitpid(children[i], NULL, 0);
    fprintf(stderr, "lat_tcp: server on %s:%d stopped\n", addr, port);
    return 0;
}

/* ------------------------------------------------------------ client --- */

static int connect_to(const char *host, int port, int nodelay)
{
    struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    int rc = getaddrinfo(host, portstr, &hints, &res);
    if (rc != 0)
        die("cannot resolve %s (port %d): %s", host, port, gai_strerror(rc));
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0)
        die("socket: %s", strerror(errno));
    if (nodelay) {
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (connect(fd, res->ai_addr, res->ai_addrlen) < 0)
        die("connect to %s:%d: %s", host, port, strerror(errno));
    freeaddrinfo(res);
    return fd;
}

/* lmbench 3.0-a9's tcp_connect, as -L uses it: a refused (or reset)
 * connect is retried until 11 attempts have failed, then -1 is returned and
 * nobody checks it.  Other connect errors end the client, as lmbench's
 * perror + exit(4) does (ours: exit 1). */
static int connect_unchecked(const char *host, int port, int nodelay)
{
    for (int tries = 0; tries <= 10; tries++) {
        struct addrinfo hints = { .ai_family = AF_INET, .ai_socktype = SOCK_STREAM };
        struct addrinfo *res;
        char portstr[16];
        snprintf(portstr, sizeof portstr, "%d", port);
        int rc = getaddrinfo(host, portstr, &hints, &res);
        if (rc != 0)
            die("cannot resolve %s (port %d): %s", host, port, gai_strerror(rc));
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            die("socket: %s", strerror(errno));
        if (nodelay) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        rc = connect(fd, res->ai_addr, res->ai_addrlen);
        int err = errno;
        freeaddrinfo(res);
        if (rc == 0)
            return fd;
        close(fd);
        if (err != ECONNREFUSED && err != ECONNRESET)
            die("connect to %s:%d: %s", host, port, strerror(err));
    }
    return -1;
}

static const char *g_host;
static int g_port;
static int g_unchecked;                 /* -L */
static uint64_t g_failed_calls;         /* -L: writes and reads that failed */

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* -L: `iters` round trips as lmbench's doclient does them: one write and
 * one read, results not acted on (only failures counted). */
static double batch_unchecked(int fd, char *buf, size_t msize, uint64_t iters)
{
    uint64_t failed = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++) {
        failed += write(fd, buf, msize) < 0;
        failed += read(fd, buf, msize) < 0;
    }
    double t = now_ns() - t0;
    g_failed_calls += failed;
    return t;
}

/* Time `iters` back-to-back round trips; returns elapsed nanoseconds. */
static double batch(int fd, char *buf, size_t msize, uint64_t iters)
{
    if (g_unchecked)
        return batch_unchecked(fd, buf, msize, iters);
    double t0 = now_ns();
    for (uint64_t i = 0; i < iters; i++) {
        if (write_full(fd, buf, msize) < 0)
            die("write to %s:%d: %s", g_host, g_port, strerror(errno));
        int r = read_full(fd, buf, msize);
        if (r <= 0)
            die("read from %s:%d: %s", g_host, g_port,
                r == 0 ? "connection closed by server" : strerror(errno));
    }
    return now_ns() - t0;
}

/* The count of round trips per batch for a batch of about target_ns.
 * First WARMUP_ROUND_TRIPS untimed round trips: the first ones wake the
 * server's connection child for the first time after its fork and would
 * make the first batches look slow.  Then the count doubles from 1 until a
 * batch lasts at least target/8, and is scaled to the target; a batch at
 * the scaled count is timed, and while it is off by more than 2x (a batch
 * that waited once for something else gives too small a count) the count
 * is scaled again, at most CALIBRATION_CHECKS times. */
#define WARMUP_ROUND_TRIPS 16
#define CALIBRATION_CHECKS 4
static uint64_t scale_count(uint64_t iters, double t, double target_ns)
{
    double n = (double)iters * (target_ns / (t > 1 ? t : 1));
    return n < 1 ? 1 : n > (double)(1ULL << 40) ? (1ULL << 40) : (uint64_t)n;
}

static uint64_t calibrate(int fd, char *buf, size_t msize, double target_ns)
{
    batch(fd, buf, msize, WARMUP_ROUND_TRIPS);
    uint64_t iters = 1;
    double t;
    while ((t = batch(fd, buf, msize, iters)) < target_ns / 8 && iters < (1ULL << 40))
        iters *= 2;
    for (int k = 0; k < CALIBRATION_CHECKS; k++) {
        iters = scale_count(iters, t, target_ns);
        t = batch(fd, buf, msize, iters);
        if (t >= target_ns / 2 && t <= target_ns * 2)
            break;
    }
    return iters;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static int run_client(const char *host, int port, size_t msize, int reps,
                      double target_s, int nodelay, int unchecked)
{
    g_host = host;
    g_port = port;
    g_unchecked = unchecked;
    int fd = unchecked ? connect_unchecked(host, port, nodelay)
                       : connect_to(host, port, nodelay);
    uint32_t word = htonl((uint32_t)msize | (nodelay ? NODELAY_FLAG : 0));
    if (unchecked) {                    /* lmbench's init: result not checked */
        ssize_t ignored = write(fd, &word, sizeof word);
        (void)ignored;
    } else if (write_full(fd, &word, sizeof word) < 0)
        die("write to %s:%d: %s", host, port, strerror(errno));
    char *buf = calloc(1, msize);
    double *samples = malloc(reps * sizeof *samples);
    double *sorted = malloc(reps * sizeof *sorted);
    if (!buf || !samples || !sorted)
        die("out of memory");

    uint64_t iters = calibrate(fd, buf, msize, target_s * 1e9);

    g_failed_calls = 0;                 /* count the timed batches only */
    for (int i = 0; i < reps; i++)
        samples[i] = batch(fd, buf, msize, iters) / 1e3 / (double)iters;
    if (fd >= 0)
        close(fd);

    memcpy(sorted, samples, reps * sizeof *sorted);
    qsort(sorted, reps, sizeof *sorted, cmp_double);
    double median = reps % 2 ? sorted[reps / 2]
                             : (sorted[reps / 2 - 1] + sorted[reps / 2]) / 2;

    fprintf(stderr, "TCP latency using %s: %.4f microseconds\n", host, median);
    printf("{\"tool\":\"lat_tcp\",\"host\":");
    json_string(host);
    printf(",\"port\":%d,\"msize\":%zu,\"nodelay\":%s,", port, msize,
           nodelay ? "true" : "false");
    printf("\"unchecked\":%s,\"connected\":%s,\"failed_calls\":%llu,",
           unchecked ? "true" : "false", fd >= 0 ? "true" : "false",
           (unsigned long long)g_failed_calls);
    printf("\"iterations\":%llu,", (unsigned long long)iters);
    printf(target_s == (double)(long)target_s ? "\"target_s\":%.1f," : "\"target_s\":%g,",
           target_s);
    printf("\"unit\":\"us\",\"median\":%.4f,\"min\":%.4f,\"max\":%.4f,\"samples\":[",
           median, sorted[0], sorted[reps - 1]);
    for (int i = 0; i < reps; i++)
        printf("%s%.4f", i ? "," : "", samples[i]);
    printf("]}\n");
    free(buf);
    free(samples);
    free(sorted);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* -------------------------------------------------------------- main --- */

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 }
    };
    int server = 0, stop = 0, nodelay = 0, unchecked = 0, port = DEFAULT_PORT, reps = 11;
    int client_opts = 0, c;
    long msize = 1;
    double target_s = 2.0;
    const char *bind_addr = NULL;

    signal(SIGPIPE, SIG_IGN);           /* a closed peer is EPIPE, not death */
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":sSm:N:p:t:nLb:h", longopts, NULL)) != -1) {
        switch (c) {
        case 's': server = 1; break;
        case 'S': stop = 1; break;
        case 'm': msize = parse_long(optarg, 1, MAX_MSIZE, 1, "-m"); client_opts = 1; break;
        case 'N': reps = (int)parse_long(optarg, 1, MAX_REPS, 0, "-N"); client_opts = 1; break;
        case 'p': port = (int)parse_long(optarg, 1, 65535, 0, "-p"); break;
        case 'n': nodelay = 1; client_opts = 1; break;
        case 'L': unchecked = 1; client_opts = 1; break;
        case 'b': bind_addr = optarg; break;
        case 't': {
            char *end;
            target_s = strtod(optarg, &end);
            if (end == optarg || *end || !isfinite(target_s) || target_s <= 0 || target_s > 60)
                usage_error("bad value for ", "-t");
            client_opts = 1;
            break;
        }
        case 'h': fputs(usage_text, stdout); return 0;
        case ':': usage_error("missing value for option ", argv[optind - 1]);
        default: {
            char opt[3] = { '-', (char)optopt, '\0' };
            usage_error("unknown option ", optopt ? opt : argv[optind - 1]);
        }
        }
    }
    int nargs = argc - optind;

    if (server && stop)
        usage_error("-s and -S cannot be combined", NULL);
    if (bind_addr && !server)
        usage_error("-b is only valid with -s", NULL);
    if (server) {
        struct in_addr tmp;
        if (nargs != 0 || client_opts)
            usage_error("the server (-s) takes only -p and -b", NULL);
        if (!bind_addr)
            bind_addr = "127.0.0.1";
        if (inet_pton(AF_INET, bind_addr, &tmp) != 1)
            usage_error("-b needs an IPv4 address, got ", bind_addr);
        return run_server(bind_addr, port);
    }
    if (nargs != 1)
        usage_error(nargs == 0 ? "missing host" : "too many arguments", NULL);
    const char *host = argv[optind];
    if (stop) {
        if (client_opts)
            usage_error("-S takes only -p and a host", NULL);
        int fd = connect_to(host, port, 0);
        uint32_t zero = 0;
        if (write_full(fd, &zero, sizeof zero) < 0)
            die("write to %s:%d: %s", host, port, strerror(errno));
        /* Wait (up to 5 s) for the server's child to hang up: once it has
         * exited, the server knows it must stop. */
        struct timeval tv = { .tv_sec = 5 };
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        while (read(fd, &zero, sizeof zero) > 0)
            ;
        close(fd);
        return 0;
    }
    return run_client(host, port, (size_t)msize, reps, target_s, nodelay, unchecked);
}
