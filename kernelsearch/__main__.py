from kernelsearch.cli import main

main()
