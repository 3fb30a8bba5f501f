dd if=/dev/nvme0n1 of=/dev/null bs=1M count=512 iflag=direct
