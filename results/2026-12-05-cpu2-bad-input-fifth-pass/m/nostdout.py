import sys
sys.stdout = None
from odd import Base as Net
