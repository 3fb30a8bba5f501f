perf script -i /tmp/pcb/perf.data
