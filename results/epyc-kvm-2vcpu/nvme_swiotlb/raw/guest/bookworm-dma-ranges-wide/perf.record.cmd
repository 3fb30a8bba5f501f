perf record -e cpu-clock -F 999 -g -a -o /tmp/pcb/perf.data -- dd if=/dev/nvme0n1 of=/dev/null bs=1M count=128 iflag=direct
