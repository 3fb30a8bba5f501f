dd if=/dev/nvme0n1 of=/dev/null bs=128k count=1024 iflag=direct
