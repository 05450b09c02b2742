"""An in-memory image data set for train's speed on a GPU (issue 37): 2,048 seeded random 224x224 images
and labels below 1,000, held as tensors, so that the step, not the disk, is what train's samples/s measures.
Not data to learn from: a throughput case only.

    pipebench train --model torchvision.models:resnet50 --data scripts/gpu/in_memory.py:images ..."""
import torch


def images():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(2048, 3, 224, 224, generator=generator)
    y = torch.randint(0, 1000, (2048,), generator=generator)
    return torch.utils.data.TensorDataset(x, y)
