# The mission's example 3 (NVML), written as for cuda.core: only the import
# lines differ (cuda.core -> cucore).
from cucore import system, Device

print(f"Devices: {system.get_num_devices()}")
d = Device(0)
d.set_current()
sd = d.to_system_device()
util = sd.utilization
mem = sd.memory_info
print(f"{sd.name}: GPU {util.gpu}%, MEM {util.memory}%")
print(f"Memory: {mem.used // 1024**2} MB / {mem.total // 1024**2} MB")
