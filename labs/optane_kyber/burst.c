/* burst.c: a CPU burst on a fixed sub-second phase, for the subsecond-offset heat map.
 *
 *   burst [-n COUNT] [-b BUSY_MS] [-o PHASE_MS] [-q QUIET_S]
 *
 * Sleeps until the next whole second of CLOCK_MONOTONIC, then QUIET_S whole seconds (default
 * 0), then COUNT times: sleeps until <second> + PHASE_MS, spins in burn() for BUSY_MS (never
 * past the end of its second), sleeps until the next second; then QUIET_S more whole seconds.
 * `burst -n 1 -b 1000 -o 0 -q 3` is one whole busy second among quiet ones: in a
 * subsecond-offset heat map, a column (the periodic default is a band across the map). So each
 * burst starts at the same sub-second offset of CLOCK_MONOTONIC, which is the clock that
 * `perf record -k CLOCK_MONOTONIC` stamps its samples with: in a subsecond-offset heat
 * map (FlameScope's rows = offset within the second) every burst lands in the same rows.
 *
 * Output (stdout): one JSON line with the burst windows it actually ran, in seconds of
 * CLOCK_MONOTONIC:
 *   {"tool":"burst","clock":"CLOCK_MONOTONIC","busy_ms":200,"phase_ms":400,"quiet_s":0,
 *    "bursts":[[start,end],...],"iterations":N}
 * Errors: a one-line message on stderr and exit status 2 (bad usage) or 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_BURSTS 600

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_until(double t)
{
	struct timespec ts;
	ts.tv_sec = (time_t)t;
	ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

/* The busy work: a named, non-inlined function so it shows up in the flame graph. */
static volatile uint64_t sink;
__attribute__((noinline)) static uint64_t burn(double until)
{
	uint64_t x = 88172645463325252ULL, n = 0;
	while (now_s() < until) {
		for (int i = 0; i < 4096; i++) { /* xorshift64: cheap, not optimised away */
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
		}
		n++;
	}
	sink = x;
	return n;
}

static long arg_long(const char *s, const char *what, long lo, long hi)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno || *end || v < lo || v > hi) {
		fprintf(stderr, "burst: %s must be an integer in %ld..%ld, not '%s'\n", what, lo, hi, s);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	long count = 4, busy_ms = 200, phase_ms = 400, quiet_s = 0;
	int opt;
	if (argc == 2 && strcmp(argv[1], "--help") == 0)   /* the long form every lab program takes */
		argv[1] = "-h";
	while ((opt = getopt(argc, argv, "n:b:o:q:h")) != -1) {
		switch (opt) {
		case 'n': count = arg_long(optarg, "-n COUNT", 1, MAX_BURSTS); break;
		case 'b': busy_ms = arg_long(optarg, "-b BUSY_MS", 1, 1000); break;
		case 'o': phase_ms = arg_long(optarg, "-o PHASE_MS", 0, 999); break;
		case 'q': quiet_s = arg_long(optarg, "-q QUIET_S", 0, 60); break;
		default:
			fprintf(opt == 'h' ? stdout : stderr, "usage: burst [-n COUNT] [-b BUSY_MS] [-o PHASE_MS] [-q QUIET_S]\n");
			return opt == 'h' ? 0 : 2;
		}
	}
	if (optind != argc || phase_ms + busy_ms > 1000) {
		fprintf(stderr, "burst: bad arguments (the burst must end within its second: PHASE_MS + BUSY_MS <= 1000)\n");
		return 2;
	}
	static double win[MAX_BURSTS][2];
	uint64_t iters = 0;
	double second = (double)(long)now_s() + 1.0 + (double)quiet_s;
	for (long k = 0; k < count; k++, second += 1.0) {
		sleep_until(second + phase_ms / 1000.0);
		win[k][0] = now_s();
		double until = win[k][0] + busy_ms / 1000.0;
		/* woken late, a burst still ends within its second (its column of the heat map) */
		iters += burn(until < second + 1.0 ? until : second + 1.0);
		win[k][1] = now_s();
	}
	/* a quiet tail: the last second is complete in the profile, then QUIET_S quiet seconds */
	sleep_until(second + (double)quiet_s);
	printf("{\"tool\":\"burst\",\"clock\":\"CLOCK_MONOTONIC\",\"busy_ms\":%ld,\"phase_ms\":%ld,\"quiet_s\":%ld,\"bursts\":[",
	       busy_ms, phase_ms, quiet_s);
	for (long k = 0; k < count; k++)
		printf("%s[%.6f,%.6f]", k ? "," : "", win[k][0], win[k][1]);
	printf("],\"iterations\":%llu}\n", (unsigned long long)iters);
	return fflush(stdout) == 0 ? 0 : 1;
}
