# JupyterLab with the course's pinned stack, CPU only. Build, then run from the checkout (README, Docker):
#   docker build -t accelerated-dl .
#   docker run --rm -it --init --shm-size=1g -p 8888:8888 -p 6006:6006 --user "$(id -u):$(id -g)" \
#     -v "$PWD/notebooks:/home/course/notebooks" -v "$PWD/data:/home/course/data" accelerated-dl
# torch and torchvision come from PyTorch's CPU index (no CUDA libraries, about 3 GB less). For a GPU image:
#   docker build --build-arg TORCH_INDEX=https://pypi.org/simple -t accelerated-dl-gpu .
FROM python:3.11-slim

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=2 \
    COURSE_DATA_DIR=/home/course/data \
    COURSE_IN_CONTAINER=1 \
    HOME=/home/course

# Lesson 11's torch.compile builds its CPU kernels with a C++ compiler, which the slim image lacks. Debian's
# package versions change with its security updates, so g++ is not pinned.
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*

# Any user id may run the container (--user "$(id -u):$(id -g)" keeps the mounted notebooks yours): the home
# folder, where Jupyter and matplotlib keep their settings, is writable by all, like /tmp.
RUN useradd --create-home --uid 1000 course && chmod 1777 /home/course
WORKDIR /home/course

# The same versions as requirements.txt pins (tests/test_environment.py checks), from the index above; the
# requirements then find them installed (2.14.1+cpu satisfies ==2.14.1).
RUN pip install --no-cache-dir --index-url "${TORCH_INDEX}" torch==2.14.1 torchvision==0.29.1
COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY --chown=course:course pyproject.toml README.md ./
COPY --chown=course:course course_utils ./course_utils
COPY --chown=course:course notebooks ./notebooks
COPY --chown=course:course data/README.md ./data/README.md
RUN pip install --no-cache-dir --no-deps .

USER 1000:1000
EXPOSE 8888 6006
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--notebook-dir=/home/course/notebooks"]
