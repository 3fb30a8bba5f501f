python3 /job/alternate.py --mib 256 --rounds 1 --warmup 0 /dev/nvme0n1 /dev/vda
