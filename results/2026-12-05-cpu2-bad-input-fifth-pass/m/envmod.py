import os
os.environ["PIPEBENCH_TEMP"] = "/"
os.environ["CUDA_VISIBLE_DEVICES"] = "0"
from odd import Base as Net
