"""VT-GAN (paper 001): conditional tabular GAN split between a server and its clients."""
