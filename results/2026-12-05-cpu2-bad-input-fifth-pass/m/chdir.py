import os
os.chdir("/")
from odd import Base as Net
