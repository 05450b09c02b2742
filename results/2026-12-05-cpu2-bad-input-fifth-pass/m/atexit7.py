import atexit, os
atexit.register(lambda: os._exit(7))
from odd import Base as Net
