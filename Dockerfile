# JupyterLab with the course's pinned stack. Build and run:
#   docker build -t accelerated-dl .
#   docker run --rm -p 8888:8888 -v "$PWD/data:/home/course/data" accelerated-dl
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TF_CPP_MIN_LOG_LEVEL=2 \
    COURSE_DATA_DIR=/home/course/data

RUN useradd --create-home --uid 1000 course
WORKDIR /home/course

COPY requirements.txt ./
RUN pip install --no-cache-dir -r requirements.txt

COPY --chown=course:course pyproject.toml README.md ./
COPY --chown=course:course course_utils ./course_utils
COPY --chown=course:course notebooks ./notebooks
COPY --chown=course:course data/README.md ./data/README.md
RUN pip install --no-cache-dir --no-deps .

USER 1000:1000
EXPOSE 8888
CMD ["jupyter", "lab", "--ip=0.0.0.0", "--port=8888", "--no-browser", "--notebook-dir=/home/course/notebooks"]
