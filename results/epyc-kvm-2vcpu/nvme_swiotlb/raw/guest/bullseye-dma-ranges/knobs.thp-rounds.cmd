cat /sys/kernel/mm/transparent_hugepage/enabled
