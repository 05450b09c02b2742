import sys
sys.setrecursionlimit(60)
from odd import Base as Net
