from herdless.cli.main import main

main()
