sh -c 'echo $$ > /sys/kernel/tracing/set_event_pid && echo 1 > /sys/kernel/tracing/tracing_on && exec dd if=/dev/nvme0n1 of=/dev/null bs=1M count=512 iflag=direct'
