grep -e CPU -e nvme /proc/interrupts
