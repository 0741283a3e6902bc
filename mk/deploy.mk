# Winners in unmodified programs (docs/deploy.md): the loop on the project's own program, and what liba2a costs.
.PHONY: deploy-demo deploy-overhead
deploy-demo: install
	examples/deploy_loop.sh results/deploy-loop

deploy-overhead: install
	examples/deploy_overhead.sh 5 1 2 4
